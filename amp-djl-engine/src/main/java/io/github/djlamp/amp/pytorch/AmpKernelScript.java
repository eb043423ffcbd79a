package io.github.djlamp.amp.pytorch;

import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.MemoryLayout;

/**
 * The TorchScript source of djl-amp's kernel module: one method per operation that DJL's PyTorch
 * engine does not expose.
 *
 * <p>dtype codes are PyTorch's {@code ScalarType}: 5 half, 6 float, 15 bfloat16. {@code torch.to}
 * here records autograd (DJL's own {@code toType} runs under {@code NoGradGuard}).
 */
final class AmpKernelScript {

    /** The module's class name. */
    static final String CLASS_NAME = "DjlAmpKernels";

    /** PyTorch's ScalarType code of float16. */
    static final int HALF = 5;

    /** PyTorch's ScalarType code of float32. */
    static final int FLOAT = 6;

    /** PyTorch's ScalarType code of float64. */
    static final int DOUBLE = 7;

    /** PyTorch's ScalarType code of int64. */
    static final int LONG = 4;

    /** PyTorch's ScalarType code of bfloat16. */
    static final int BFLOAT16 = 15;

    static final String SOURCE =
            String.join(
                    "\n",
                    "class " + CLASS_NAME + "(Module):",
                    "  __parameters__ = []",
                    "  __buffers__ = []",
                    "  training : bool",
                    castMethods(),
                    "  def forward(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return x",
                    "  def dtype_code(self: __torch__." + CLASS_NAME + ", x: Tensor) -> int:",
                    "    return x.dtype",
                    "  def unscale_(self: __torch__."
                            + CLASS_NAME
                            + ", grads: List[Tensor],"
                            + " found_inf: Tensor, inv_scale: Tensor) -> None:",
                    "    fused: List[Tensor] = []",
                    "    generic: List[Tensor] = []",
                    "    for g in grads:",
                    "      if g.dtype == " + BFLOAT16 + ":",
                    "        generic.append(g)",
                    "      else:",
                    "        fused.append(g)",
                    "    if len(fused) > 0:",
                    "      torch._amp_foreach_non_finite_check_and_unscale_(fused, found_inf,"
                            + " inv_scale)",
                    "    self.unscale_generic_(generic, found_inf, inv_scale)",
                    "    return None",
                    // CUDA has no bf16 version of the fused kernel: the same result from generic
                    // ops, still with no host read
                    "  def unscale_generic_(self: __torch__."
                            + CLASS_NAME
                            + ", grads: List[Tensor],"
                            + " found_inf: Tensor, inv_scale: Tensor) -> None:",
                    "    for g in grads:",
                    "      bad = torch.logical_not(torch.isfinite(g)).any()",
                    "      found_inf.masked_fill_(bad, 1.0)",
                    "      g.copy_(torch.to(g, " + FLOAT + ") * inv_scale.reshape([]))",
                    "    return None",
                    // DJL's Optimizer adjusts every gradient first: g * rescaleGrad, then, from
                    // DJL's PyTorch engine, clamp_max(clipGrad) (from above only)
                    "  def adjust_(self: __torch__."
                            + CLASS_NAME
                            + ", grads: List[Tensor], rescale: float, clip: float) -> None:",
                    "    if rescale != 1.0:",
                    "      torch._foreach_mul_(grads, rescale)",
                    "    if clip >= 0.0:",
                    "      torch._foreach_clamp_max_(grads, clip)",
                    "    return None",
                    // DJL's Optimizer.updateCount: each trained parameter counts its applied
                    // steps, and an update's count is the largest count so far plus
                    // beginNumUpdate; a skipped step counts nothing. Returns the step's count.
                    "  def count_(self: __torch__."
                            + CLASS_NAME
                            + ", counts: Tensor, trained: Tensor, count: Tensor, begin: float,"
                            + " clean: Tensor) -> Tensor:",
                    "    counts.add_(trained * clean)",
                    "    top = torch.max(counts * trained) + begin",
                    "    now = count.reshape([])",
                    "    now = torch.where(torch.gt(clean, 0.0), torch.maximum(now, top), now)",
                    "    count.copy_(now.reshape(count.shape))",
                    "    return now",
                    // the rate of the update whose count is `count`, from the host's table
                    "  def rate_(self: __torch__."
                            + CLASS_NAME
                            + ", values: Tensor, first: float, count: Tensor) -> Tensor:",
                    "    last = float(values.size(0) - 1)",
                    "    index = torch.clamp(count - first, 0.0, last)",
                    "    picked = torch.index_select(values, 0, torch.to(index, "
                            + LONG
                            + ").reshape([1]))",
                    "    return torch.to(picked.reshape([]), " + FLOAT + ")",
                    // what every fused step does first: the skip as a float, DJL's gradient
                    // adjustment, DJL's count of this update (not advanced by a skip)
                    "  def begin_step_(self: __torch__."
                            + CLASS_NAME
                            + ", grads: List[Tensor], rescale: float, clip: float, counts: Tensor,"
                            + " trained: Tensor, count: Tensor, begin: float, found_inf: Tensor) ->"
                            + " Tuple[Tensor, Tensor]:",
                    "    skip = torch.to(torch.ne(found_inf, 0.0), " + FLOAT + ").reshape([])",
                    "    self.adjust_(grads, rescale, clip)",
                    "    n = self.count_(counts, trained, count, begin, 1.0 - skip)",
                    "    return skip, n",
                    // _fused_sgd_ with DJL's rate: a constant one passed through (the buffer
                    // holds b / lr), a scheduled one put into the gradient first (the buffer holds
                    // the rates, as DJL's)
                    "  def sgd_(self: __torch__."
                            + CLASS_NAME
                            + ", params: List[Tensor], grads: List[Tensor], bufs: List[Tensor],"
                            + " momentum: float, nesterov: bool, weight_decay: float, lr: float,"
                            + " lr_values: List[Tensor], lr_first: float, n: Tensor, skip: Tensor)"
                            + " -> None:",
                    "    if len(lr_values) == 0:",
                    "      torch._fused_sgd_(params, grads, bufs, weight_decay=weight_decay,"
                            + " momentum=momentum, lr=lr, dampening=0.0, nesterov=nesterov,"
                            + " maximize=False, is_first_step=False, grad_scale=None,"
                            + " found_inf=skip)",
                    "    else:",
                    "      rate = self.rate_(lr_values[0], lr_first, n)",
                    "      if weight_decay != 0.0:",
                    "        torch._foreach_add_(grads, params, alpha=weight_decay)",
                    "      torch._foreach_mul_(grads, rate)",
                    "      torch._fused_sgd_(params, grads, bufs, weight_decay=0.0,"
                            + " momentum=momentum, lr=1.0, dampening=0.0, nesterov=nesterov,"
                            + " maximize=False, is_first_step=False, grad_scale=None,"
                            + " found_inf=skip)",
                    "    return None",
                    // DJL's Adam: w -= lr_t * m / (sqrt(v) + eps), lr_t = lr sqrt(1 - b2^t) / (1 -
                    // b1^t), t = DJL's update count. The kernel's own bias corrections are made 1
                    // by a huge step count and lr_t is handed over as a device tensor from the
                    // device count, which advances on clean steps only. DJL's AdamW decays by lr *
                    // wd before the update, which the kernel's AdamW (lr_t * wd) does not: done
                    // here instead.
                    "  def adam_(self: __torch__."
                            + CLASS_NAME
                            + ", params: List[Tensor], grads: List[Tensor], state: List[Tensor],"
                            + " settings: Dict[str, float], weight_decay: float, decoupled: bool,"
                            + " lr: float, lr_values: List[Tensor], lr_first: float, n: Tensor,"
                            + " skip: Tensor) -> None:",
                    "    beta1 = settings[\"beta1\"]",
                    "    beta2 = settings[\"beta2\"]",
                    "    k = len(params)",
                    "    clean = 1.0 - skip",
                    "    rate = torch.full_like(skip, lr)",
                    "    if len(lr_values) > 0:",
                    "      rate = self.rate_(lr_values[0], lr_first, n)",
                    "    t = torch.clamp_min(n, 1.0)",
                    "    lr_t = rate * torch.sqrt(1.0 - torch.pow(beta2, t)) / (1.0 -"
                            + " torch.pow(beta1, t))",
                    "    l2 = weight_decay",
                    "    if decoupled:",
                    "      torch._foreach_mul_(params, 1.0 - clean * (rate * weight_decay))",
                    "      l2 = 0.0",
                    "    no_correction = torch.full_like(skip, 1.0e9)",
                    "    kernel_steps: List[Tensor] = []",
                    "    for p in params:",
                    "      kernel_steps.append(no_correction)",
                    "    empty: List[Tensor] = []",
                    "    torch._fused_adam_(params, grads, state[0:k], state[k:2 * k], empty,"
                            + " kernel_steps, lr=torch.to(lr_t, "
                            + FLOAT
                            + "), beta1=beta1, beta2=beta2, weight_decay=l2,"
                            + " eps=settings[\"epsilon\"], amsgrad=False, maximize=False,"
                            + " grad_scale=None, found_inf=skip)",
                    "    return None",
                    // one method per fused optimizer kind of amp-core, named after DJL's optimizer
                    fusedKernel(
                            "sgd",
                            "    self.sgd_(params, grads, state, settings[\"momentum\"], False,"
                                    + " weight_decay, lr, lr_values, lr_first, n, skip)"),
                    fusedKernel(
                            "adam",
                            "    self.adam_(params, grads, state, settings, weight_decay, False, lr,"
                                    + " lr_values, lr_first, n, skip)"),
                    fusedKernel(
                            "adamw",
                            "    self.adam_(params, grads, state, settings, weight_decay, True, lr,"
                                    + " lr_values, lr_first, n, skip)"),
                    // DJL's Nag clips from both sides (adjust_ clips from above), then PyTorch's
                    // Nesterov SGD is DJL's update (the derivation is in amp-core's FusedNag)
                    fusedKernel(
                            "nag",
                            "    if clip >= 0.0:",
                            "      torch._foreach_clamp_min_(grads, -clip)",
                            "    self.sgd_(params, grads, state, settings[\"momentum\"], True,"
                                    + " weight_decay, lr, lr_values, lr_first, n, skip)"),
                    // djl-amp's scale update with hysteresis, min and max, decided on the device
                    // in float64 arithmetic as the host mirror does it; a back-off below the
                    // minimum leaves the scale and raises `collapsed` for the host to report
                    "  def update_scale_hysteresis_(self: __torch__."
                            + CLASS_NAME
                            + ", scale: Tensor, tracker: Tensor, overflows: Tensor, skipped:"
                            + " Tensor, collapsed: Tensor, found_inf: Tensor, growth_factor: float,"
                            + " backoff_factor: float, growth_interval: int, hysteresis: int,"
                            + " min_scale: float, max_scale: float) -> None:",
                    "    found = torch.ne(found_inf.reshape([]), 0.0)",
                    "    clean = torch.logical_not(found)",
                    "    s32 = scale.reshape([])",
                    "    s = torch.to(s32, " + DOUBLE + ")",
                    "    t = tracker.reshape([])",
                    "    o = overflows.reshape([])",
                    "    backs_off = torch.logical_and(found, torch.ge(o + 1, hysteresis))",
                    "    backed = torch.to(s * backoff_factor, " + FLOAT + ")",
                    "    collapse = torch.logical_and(backs_off, torch.lt(backed, min_scale))",
                    "    backs_off = torch.logical_and(backs_off, torch.logical_not(collapse))",
                    "    grows = torch.logical_and(clean, torch.eq(t + 1, growth_interval))",
                    "    growth = torch.where(torch.gt(s * growth_factor, max_scale), torch.div(torch.full_like(s, max_scale), s),"
                            + " torch.full_like(s, growth_factor))",
                    "    grown = torch.to(s * growth, " + FLOAT + ")",
                    "    grown_ok = torch.logical_and(grows, torch.isfinite(grown))",
                    "    new_scale = torch.where(backs_off, backed, torch.where(grown_ok, grown,"
                            + " s32))",
                    "    reset_o = torch.logical_or(backs_off, torch.logical_and(grown_ok,"
                            + " torch.ne(grown, s32)))",
                    "    new_o = torch.where(reset_o, torch.zeros_like(o), torch.where(found, o + 1,"
                            + " o))",
                    "    new_t = torch.where(torch.logical_or(found, grows), torch.zeros_like(t),"
                            + " t + 1)",
                    "    scale.copy_(new_scale.reshape(scale.shape))",
                    "    tracker.copy_(new_t.reshape(tracker.shape))",
                    "    overflows.copy_(new_o.reshape(overflows.shape))",
                    "    skipped.add_(torch.to(found, skipped.dtype).reshape(skipped.shape))",
                    "    collapsed.copy_(torch.to(collapse, collapsed.dtype).reshape(collapsed.shape))",
                    "    return None",
                    "  def to_host_(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return torch.to(x.reshape([-1]), torch.device(\"cpu\"), 6, False, True)",
                    "  def copy_(self: __torch__."
                            + CLASS_NAME
                            + ", dst: List[Tensor], src: List[Tensor]) -> None:",
                    "    torch._foreach_copy_(dst, src)",
                    "    return None",
                    "  def restore_where_(self: __torch__."
                            + CLASS_NAME
                            + ", live: List[Tensor], saved: List[Tensor], found_inf: Tensor) ->"
                            + " None:",
                    "    skip = torch.ne(found_inf.reshape([]), 0.0)",
                    "    for i in range(len(live)):",
                    "      torch.where(skip, saved[i], live[i], out=live[i])",
                    "    return None",
                    "  def zero_(self: __torch__." + CLASS_NAME + ", grads: List[Tensor]) -> None:",
                    "    torch._foreach_zero_(grads)",
                    "    return None",
                    "  def update_scale_(self: __torch__."
                            + CLASS_NAME
                            + ", scale: Tensor,"
                            + " growth_tracker: Tensor, found_inf: Tensor, growth_factor: float,"
                            + " backoff_factor: float, growth_interval: int) -> Tensor:",
                    "    return torch._amp_update_scale_(scale, growth_tracker, found_inf,"
                            + " growth_factor, backoff_factor, growth_interval)",
                    "");

    private AmpKernelScript() {}

    /** The name of the method of a fused optimizer kernel, e.g. {@code fused_adam_}. */
    static String fusedMethod(String kernel) {
        return "fused_" + kernel + "_";
    }

    /**
     * Returns whether the module has a fused kernel of that name.
     *
     * @param kernel the kernel's name, e.g. {@code adam}
     * @return true when {@link #SOURCE} defines its method
     */
    static boolean hasFusedKernel(String kernel) {
        return SOURCE.contains("  def " + fusedMethod(kernel) + "(self:");
    }

    /**
     * A fused optimizer kernel: every one takes the same arguments (those of {@link
     * io.github.djlamp.amp.spi.FusedOptimizerStep}, the state as one flat list, buffer kind after
     * buffer kind), starts with {@code begin_step_} (which defines {@code skip} and the update
     * count {@code n} for the body) and ends by zeroing every gradient, skipped or not.
     */
    private static String fusedKernel(String kernel, String... body) {
        return String.join(
                "\n",
                "  def "
                        + fusedMethod(kernel)
                        + "(self: __torch__."
                        + CLASS_NAME
                        + ", params: List[Tensor], grads: List[Tensor], state: List[Tensor],"
                        + " settings: Dict[str, float], weight_decay: float, lr: float, lr_values:"
                        + " List[Tensor], lr_first: float, rescale: float, clip: float, counts:"
                        + " Tensor, trained: Tensor, count: Tensor, begin: float, found_inf:"
                        + " Tensor) -> None:",
                "    skip, n = self.begin_step_(grads, rescale, clip, counts, trained, count,"
                        + " begin, found_inf)",
                String.join("\n", body),
                "    torch._foreach_zero_(grads)",
                "    return None");
    }

    /** PyTorch's ScalarType code of a precision. */
    static int dtypeCode(Precision precision) {
        switch (precision) {
            case FP16:
                return HALF;
            case BF16:
                return BFLOAT16;
            default:
                return FLOAT;
        }
    }

    /** PyTorch's MemoryFormat code of a layout: 0 contiguous, 1 preserve, 2 channels-last. */
    static int memoryFormat(MemoryLayout layout) {
        switch (layout) {
            case CONTIGUOUS:
                return 0;
            case CHANNELS_LAST:
                return 2;
            default:
                return 1;
        }
    }

    /** The name of the method that casts to a precision and layout, e.g. {@code to_bf16_2}. */
    static String castMethod(Precision precision, MemoryLayout layout) {
        return "to_" + precision.shortName() + "_" + memoryFormat(layout);
    }

    private static String castMethods() {
        StringBuilder methods = new StringBuilder();
        for (Precision precision : Precision.values()) {
            for (MemoryLayout layout : MemoryLayout.values()) {
                methods.append("  def ")
                        .append(castMethod(precision, layout))
                        .append("(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:\n")
                        .append("    return torch.to(x, ")
                        .append(dtypeCode(precision))
                        .append(", False, False, ")
                        .append(memoryFormat(layout))
                        .append(")\n");
            }
        }
        return methods.toString();
    }
}
