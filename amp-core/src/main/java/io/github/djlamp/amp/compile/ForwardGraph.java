package io.github.djlamp.amp.compile;

import ai.djl.nn.Parameter;
import io.github.djlamp.amp.policy.Precision;
import java.util.List;

/**
 * A block tree's forward, or a run of a container's children, as a straight list of operations,
 * engine-agnostic: an engine turns it into one native call (amp-djl-engine: a TorchScript method).
 * Values 0 to {@code inputs - 1} are the inputs; the last operation's value is the output.
 *
 * @param operations the operations in order
 * @param parameters the parameters the operations read, BatchNorm's running statistics among them
 *     (updated in place in training)
 * @param lowPrecision the precision of the operations marked low-precision (FP32 when none is)
 * @param inputs how many inputs: 1, or 2 for DJL's BERT encoder stack, whose value 1 is the offsets
 *     (fp32, (B, 1, S, S)) its attention adds to the scaled scores
 * @param inputLow whether the input arrives in {@code lowPrecision} (the output of a 16-bit stage
 *     before the graph)
 * @param fp32Output whether the output is cast to fp32; otherwise it stays in the precision its
 *     last operation computes in, as the eager stages leave it
 */
public record ForwardGraph(
        List<ForwardOp> operations,
        List<Parameter> parameters,
        Precision lowPrecision,
        int inputs,
        boolean inputLow,
        boolean fp32Output) {

    /**
     * Returns the value the forward returns.
     *
     * @return its number
     */
    public int output() {
        return operations.isEmpty() ? 0 : operations.get(operations.size() - 1).out();
    }
}
