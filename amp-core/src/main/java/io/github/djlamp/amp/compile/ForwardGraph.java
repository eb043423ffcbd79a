package io.github.djlamp.amp.compile;

import ai.djl.nn.Parameter;
import io.github.djlamp.amp.policy.Precision;
import java.util.List;

/**
 * A block tree's forward as a straight list of operations, engine-agnostic: an engine turns it into
 * one native call (amp-djl-engine: a TorchScript method). Value 0 is the input; the last
 * operation's value is the output, returned in fp32.
 *
 * @param operations the operations in order
 * @param parameters the tree's parameters the operations read, BatchNorm's running statistics among
 *     them (updated in place in training)
 * @param lowPrecision the precision of the operations marked low-precision (FP32 when none is)
 * @param channelsLast whether 2-D convolutions take their 16-bit input and weight channels-last
 *     (the layout oneDNN's bf16 kernels and Tensor Cores want)
 */
public record ForwardGraph(
        List<ForwardOp> operations,
        List<Parameter> parameters,
        Precision lowPrecision,
        boolean channelsLast) {

    /**
     * Returns the value the forward returns.
     *
     * @return its number
     */
    public int output() {
        return operations.isEmpty() ? 0 : operations.get(operations.size() - 1).out();
    }
}
