package io.github.djlamp.amp.pytorch;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValueUtils;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

/**
 * A TorchScript module as a kernel check runs it ({@link PtAmpBackend#recordingForCheck}): in eval
 * mode and recording. DJL runs a module's inference forward under libtorch's inference mode, whose
 * outputs carry no graph: the check compared such a module's outputs only, and a module whose
 * 16-bit gradients were wrong passed it. Its forward with recording, on the other hand, runs the
 * module in whatever mode it is in, in training mode after a training forward (dropout drawn,
 * running statistics updated).
 *
 * <p>So the module first runs DJL's inference forward, which puts it in eval mode the way DJL does
 * (and the module remembers it, so that its next training forward puts training mode back, as after
 * any evaluation in DJL), and then runs again in that mode with recording on. Whatever the caller
 * hands as {@code training}, this is the inference forward: the check calls a block of the user's
 * own with {@code training=false}, and that block hands it on to the module.
 */
final class RecordingModule extends AbstractBlock {

    private final PtSymbolBlock module;

    RecordingModule(PtSymbolBlock module) {
        this.module = module;
    }

    @Override
    protected NDList forwardInternal(
            ParameterStore store,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        module.forward(store, inputs, false, params).close();
        return IValueUtils.forward(module, inputs, true);
    }

    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return module.getOutputShapes(inputShapes);
    }

    @Override
    public String toString() {
        return "recording(" + module + ")";
    }
}
