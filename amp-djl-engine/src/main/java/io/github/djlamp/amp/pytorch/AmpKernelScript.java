package io.github.djlamp.amp.pytorch;

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

    /** PyTorch's ScalarType code of bfloat16. */
    static final int BFLOAT16 = 15;

    static final String SOURCE =
            String.join(
                    "\n",
                    "class " + CLASS_NAME + "(Module):",
                    "  __parameters__ = []",
                    "  __buffers__ = []",
                    "  training : bool",
                    "  def forward(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return x",
                    "  def to_fp32(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return torch.to(x, " + FLOAT + ")",
                    "  def to_fp16(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return torch.to(x, " + HALF + ")",
                    "  def to_bf16(self: __torch__." + CLASS_NAME + ", x: Tensor) -> Tensor:",
                    "    return torch.to(x, " + BFLOAT16 + ")",
                    "  def dtype_code(self: __torch__." + CLASS_NAME + ", x: Tensor) -> int:",
                    "    return x.dtype",
                    "  def unscale_(self: __torch__."
                            + CLASS_NAME
                            + ", grads: List[Tensor],"
                            + " found_inf: Tensor, inv_scale: Tensor) -> None:",
                    "    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf,"
                            + " inv_scale)",
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
}
