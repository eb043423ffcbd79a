package io.github.djlamp.amp.spi;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;

/**
 * A block tree's forward made into one native call by an engine ({@link
 * AmpBackend#compileForward}). Autograd records through it: the gradients of the output reach the
 * parameters' arrays as the eager forward's would. It holds code only, and may be shared by every
 * run of the same operations; the engine keeps it for the life of the JVM.
 */
public interface CompiledForward {

    /**
     * Runs the forward.
     *
     * @param inputs the graph's inputs ({@link io.github.djlamp.amp.compile.ForwardGraph#inputs()})
     * @param parameters the values of the graph's parameters, in its order, on the input's device
     * @param training whether to run as DJL does in training (BatchNorm on the batch's statistics,
     *     updating the running ones in place)
     * @return the output, attached to the first input's manager
     */
    NDArray forward(NDList inputs, NDList parameters, boolean training);
}
