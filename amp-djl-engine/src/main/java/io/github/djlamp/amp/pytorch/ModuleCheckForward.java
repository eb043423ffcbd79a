package io.github.djlamp.amp.pytorch;

import ai.djl.ndarray.NDList;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValueUtils;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * A TorchScript module's forward for a kernel check: in eval mode and recording. DJL runs a
 * module's inference forward under libtorch's inference mode, whose outputs carry no graph: the
 * check compared such a module's outputs only, and a module whose 16-bit gradients were wrong
 * passed it. Its forward with recording, on the other hand, runs the module in whatever mode it is
 * in, in training mode after a training forward (dropout drawn, running statistics updated).
 *
 * <p>So the module first runs DJL's inference forward, which puts it in eval mode the way DJL does
 * (and the block remembers it, so that its next training forward puts training mode back, as after
 * any evaluation in DJL), and then runs again in that mode with recording on. Gradients are taken
 * with respect to the module's own weights ({@link PtAmpBackend#computesWithOwnParameters}),
 * returned, not added into theirs.
 */
final class ModuleCheckForward {

    private ModuleCheckForward() {}

    static NDList forward(
            PtSymbolBlock module,
            ParameterStore store,
            NDList inputs,
            PairList<String, Object> params) {
        module.forward(store, inputs, false, params).close();
        return IValueUtils.forward(module, inputs, true);
    }
}
