package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.JniUtils;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.spi.CompiledForward;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link ForwardGraph} loaded as a TorchScript module ({@link ForwardGraphScript}) and run with
 * autograd recording through DJL's native module call: one JNI call a forward, the parameters as
 * one TorchScript list.
 */
final class PtCompiledForward implements CompiledForward {

    private final PtSymbolBlock module;

    private PtCompiledForward(PtSymbolBlock module) {
        this.module = module;
    }

    /**
     * The modules loaded so far, by their source: a module holds code only (the parameters come
     * with each call), so runs of the same operations share one, on every device, and a new input
     * shape of a run reuses its module. They live as long as the JVM.
     */
    private static final Map<String, PtCompiledForward> LOADED = new ConcurrentHashMap<>();

    static PtCompiledForward load(ForwardGraph graph) {
        return LOADED.computeIfAbsent(ForwardGraphScript.source(graph), PtCompiledForward::loadNew);
    }

    private static PtCompiledForward loadNew(String source) {
        NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        byte[] archive = TorchScriptArchive.build(ForwardGraphScript.CLASS_NAME, source);
        try {
            PtSymbolBlock module =
                    JniUtils.loadModule(
                            (PtNDManager) manager, new ByteArrayInputStream(archive), true, false);
            // kept for the JVM's life, owned by no manager: a manager it would hold open counts
            // among the process's open ones for the rest of training
            manager.detachInternal(String.valueOf(module.getHandle()));
            manager.close();
            return new PtCompiledForward(module);
        } catch (IOException | RuntimeException e) {
            manager.close();
            throw new AmpException("Could not load the compiled forward:\n" + source, e);
        }
    }

    /**
     * Runs the graph. Autograd records as the eager calls would: where the thread's grad mode is on
     * (a {@code GradientCollector}), in training or not. The arguments go to the native call as
     * values ({@link ModuleCalls}), so one model's forwards on several threads run at once.
     */
    @Override
    public NDArray forward(NDList inputs, NDList parameters, boolean training) {
        PtNDArray[] values = new PtNDArray[parameters.size()];
        for (int i = 0; i < values.length; i++) {
            values[i] = (PtNDArray) parameters.get(i);
        }
        PtNDArray[] arguments = new PtNDArray[inputs.size()];
        for (int i = 0; i < arguments.length; i++) {
            arguments[i] = (PtNDArray) inputs.get(i);
        }
        String method = training ? "forward" : "forward_inference";
        return UnoptimizedGraphs.get()
                .run(() -> ModuleCalls.call(module, method, arguments, values));
    }
}
