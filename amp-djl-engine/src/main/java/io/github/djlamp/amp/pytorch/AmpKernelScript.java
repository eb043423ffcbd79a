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

    /** The method that back-propagates a checkpointed segment's recomputation. */
    static final String BACKWARD_TO = "backward_to";

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
                    "  def requires_grad(self: __torch__." + CLASS_NAME + ", x: Tensor) -> bool:",
                    "    return x.requires_grad",
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
                    FusedKernelScript.methods(),
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
                    // the gradients of wrt[:n] as the graph computes them (autograd.grad puts
                    // nothing into a leaf, so nothing is copied into the leaf's layout); those of
                    // wrt[n:] added into theirs, as backward adds them; empty where none arrives
                    "  def "
                            + BACKWARD_TO
                            + "(self: __torch__."
                            + CLASS_NAME
                            + ", outputs: List[Tensor], grads: List[Tensor], wrt: List[Tensor],"
                            + " n: Tensor) -> List[Tensor]:",
                    "    inputs = int(n.item())",
                    "    cotangents: List[Optional[Tensor]] = []",
                    "    for g in grads:",
                    "      cotangents.append(g)",
                    "    found = torch.autograd.grad(outputs, wrt, cotangents, False, False, True)",
                    "    leaves: List[Tensor] = []",
                    "    into: List[Optional[Tensor]] = []",
                    "    for i in range(inputs, len(wrt)):",
                    "      g = found[i]",
                    "      if g is not None:",
                    "        leaves.append(wrt[i].view_as(wrt[i]))",
                    "        into.append(g)",
                    "    if len(leaves) > 0:",
                    "      torch.autograd.backward(leaves, into)",
                    "    result: List[Tensor] = []",
                    "    for i in range(inputs):",
                    "      g = found[i]",
                    "      if g is None:",
                    "        result.append(torch.empty([0]))",
                    "      else:",
                    "        result.append(g)",
                    "    return result",
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

    /** PyTorch's ScalarType code of a precision. */
    static int dtypeCode(Precision precision) {
        return switch (precision) {
            case FP32 -> FLOAT;
            case FP16 -> HALF;
            case BF16 -> BFLOAT16;
        };
    }

    /** PyTorch's MemoryFormat code of a layout: 0 contiguous, 1 preserve, 2 channels-last. */
    static int memoryFormat(MemoryLayout layout) {
        return switch (layout) {
            case CONTIGUOUS -> 0;
            case PRESERVE -> 1;
            case CHANNELS_LAST -> 2;
        };
    }

    /** The name of the method that casts to a precision and layout, e.g. {@code to_bf16_2}. */
    static String castMethod(Precision precision, MemoryLayout layout) {
        return "to_" + precision.shortName() + "_" + memoryFormat(layout);
    }

    /**
     * The name of the method that casts a list of arrays to a precision and layout in one call,
     * e.g. {@code to_bf16_2_all}; channels-last applies to the 4-dimensional ones, the others keep
     * their layout (as {@code PtAmpBackend.cast} does one by one).
     */
    static String castAllMethod(Precision precision, MemoryLayout layout) {
        return castMethod(precision, layout) + "_all";
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
                String format =
                        layout == MemoryLayout.CHANNELS_LAST
                                ? memoryFormat(layout)
                                        + " if x.dim() == 4 else "
                                        + memoryFormat(MemoryLayout.PRESERVE)
                                : String.valueOf(memoryFormat(layout));
                methods.append("  def ")
                        .append(castAllMethod(precision, layout))
                        .append("(self: __torch__." + CLASS_NAME)
                        .append(", xs: List[Tensor]) -> List[Tensor]:\n")
                        .append("    return [torch.to(x, ")
                        .append(dtypeCode(precision))
                        .append(", False, False, ")
                        .append(format)
                        .append(") for x in xs]\n");
            }
        }
        return methods.toString();
    }
}
