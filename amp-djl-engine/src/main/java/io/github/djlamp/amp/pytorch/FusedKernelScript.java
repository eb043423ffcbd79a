package io.github.djlamp.amp.pytorch;

import static io.github.djlamp.amp.pytorch.AmpKernelScript.CLASS_NAME;
import static io.github.djlamp.amp.pytorch.AmpKernelScript.FLOAT;
import static io.github.djlamp.amp.pytorch.AmpKernelScript.LONG;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * The fused optimizer kernels of the TorchScript module ({@link AmpKernelScript}): one method per
 * fused optimizer of amp-core, named after the DJL optimizer whose update it reproduces ({@code
 * fused_sgd_}, {@code fused_adam_}, ...), and the helpers they share. A new fused optimizer that
 * needs a kernel of its own is one entry in {@link #KERNELS}.
 *
 * <p>Every kernel takes the arguments of {@link io.github.djlamp.amp.spi.FusedOptimizerStep} in one
 * order, its own settings as a list in the order its entry declares them (bound to local names of
 * the same names), and the state as one flat list, buffer kind after buffer kind. It first turns
 * the overflow flag into {@code skip}, adjusts the gradients as DJL's {@code Optimizer} does and
 * counts the update ({@code n}, not advanced by a skip), and last zeroes every gradient, skipped or
 * not.
 */
final class FusedKernelScript {

    /** A kernel: its name, the settings it takes in this order, and the lines of its body. */
    private record Kernel(String name, List<String> settings, List<String> body) {}

    private static final List<Kernel> KERNELS =
            List.of(
                    new Kernel(
                            "sgd",
                            List.of("momentum"),
                            List.of(
                                    "    self.sgd_(params, grads, state, momentum, False,"
                                            + " weight_decay, lr, lr_values, lr_first, n, skip)")),
                    new Kernel(
                            "adam",
                            List.of("beta1", "beta2", "epsilon"),
                            List.of(
                                    "    self.adam_(params, grads, state, beta1, beta2, epsilon,"
                                            + " weight_decay, False, lr, lr_values, lr_first, n,"
                                            + " skip)")),
                    new Kernel(
                            "adamw",
                            List.of("beta1", "beta2", "epsilon"),
                            List.of(
                                    "    self.adam_(params, grads, state, beta1, beta2, epsilon,"
                                            + " weight_decay, True, lr, lr_values, lr_first, n,"
                                            + " skip)")),
                    // DJL's Nag clips from both sides (adjust_ clips from above), then PyTorch's
                    // Nesterov SGD is DJL's update but for the decay term of the buffer, which
                    // MXNet takes at the new weight: the buffer moves by wd (w_new - w_old) after
                    // the kernel, with the kernel's own skip (the derivation is in amp-core's
                    // FusedNag). The gradients are zeroed afterwards, so they hold the steps.
                    new Kernel(
                            "nag",
                            List.of("momentum"),
                            List.of(
                                    "    if clip >= 0.0:",
                                    "      torch._foreach_clamp_min_(grads, -clip)",
                                    "    if weight_decay != 0.0:",
                                    "      torch._foreach_add_(grads, params, alpha=weight_decay)",
                                    "    self.sgd_(params, grads, state, momentum, True, 0.0, lr,"
                                            + " lr_values, lr_first, n, skip)",
                                    "    if weight_decay != 0.0:",
                                    "      torch._foreach_add_(grads, state, alpha=momentum)",
                                    "      decay = lr * weight_decay",
                                    "      if len(lr_values) > 0:",
                                    "        torch._foreach_mul_(grads, self.rate_(lr_values[0],"
                                            + " lr_first, n))",
                                    "        decay = weight_decay",
                                    "      empty: List[Tensor] = []",
                                    "      torch._fused_sgd_(state, grads, empty, weight_decay=0.0,"
                                            + " momentum=0.0, lr=decay, dampening=0.0,"
                                            + " nesterov=False, maximize=False,"
                                            + " is_first_step=False, grad_scale=None,"
                                            + " found_inf=skip)")));

    private static final List<String> HELPERS =
            List.of(
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
                            + " beta1: float, beta2: float, epsilon: float, weight_decay: float,"
                            + " decoupled: bool, lr: float, lr_values: List[Tensor], lr_first:"
                            + " float, n: Tensor, skip: Tensor) -> None:",
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
                            + "), beta1=beta1, beta2=beta2, weight_decay=l2, eps=epsilon,"
                            + " amsgrad=False, maximize=False, grad_scale=None,"
                            + " found_inf=skip)",
                    "    return None");

    private static final Map<String, Kernel> BY_NAME =
            KERNELS.stream().collect(Collectors.toMap(Kernel::name, Function.identity()));

    private FusedKernelScript() {}

    /**
     * Returns the name of a kernel's method.
     *
     * @param kernel the kernel's name, e.g. {@code adam}
     * @return the method's name, e.g. {@code fused_adam_}
     */
    static String method(String kernel) {
        return "fused_" + kernel + "_";
    }

    /**
     * Returns the settings a kernel takes, in the order it takes them.
     *
     * @param kernel the kernel's name
     * @return the settings' names, or null when the module has no such kernel
     */
    static List<String> settings(String kernel) {
        Kernel found = BY_NAME.get(kernel);
        return found == null ? null : found.settings();
    }

    /**
     * Returns the TorchScript source of the helpers and of every kernel's method.
     *
     * @return methods of the module's class, indented for it
     */
    static String methods() {
        List<String> lines = new ArrayList<>(HELPERS);
        for (Kernel kernel : KERNELS) {
            lines.add(
                    "  def "
                            + method(kernel.name())
                            + "(self: __torch__."
                            + CLASS_NAME
                            + ", params: List[Tensor], grads: List[Tensor], state: List[Tensor],"
                            + " settings: List[float], weight_decay: float, lr: float, lr_values:"
                            + " List[Tensor], lr_first: float, rescale: float, clip: float, counts:"
                            + " Tensor, trained: Tensor, count: Tensor, begin: float, found_inf:"
                            + " Tensor) -> None:");
            for (int i = 0; i < kernel.settings().size(); i++) {
                lines.add("    " + kernel.settings().get(i) + " = settings[" + i + "]");
            }
            lines.add("    skip = torch.to(torch.ne(found_inf, 0.0), " + FLOAT + ").reshape([])");
            lines.add("    self.adjust_(grads, rescale, clip)");
            lines.add("    n = self.count_(counts, trained, count, begin, 1.0 - skip)");
            lines.addAll(kernel.body());
            lines.add("    torch._foreach_zero_(grads)");
            lines.add("    return None");
        }
        return String.join("\n", lines);
    }
}
