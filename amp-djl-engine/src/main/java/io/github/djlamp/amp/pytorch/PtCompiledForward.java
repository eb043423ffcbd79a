package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValueUtils;
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

    private static final String METHOD_MARKER = "module_method:";

    private final PtSymbolBlock module;

    /**
     * The array whose name tells DJL's call to run the inference method. DJL reads only its name,
     * so one CPU array serves every call on every device: made on an input's device each call, it
     * cost a copy from the host, which on a GPU waits for the queued kernels. Owned by no manager,
     * it lives as long as the JVM, made at the first inference call.
     */
    private static final class InferenceMarker {
        static final NDArray ARRAY = make();

        private static NDArray make() {
            NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
            NDArray marker = manager.create(0f);
            marker.setName(METHOD_MARKER + "forward_inference");
            manager.detachInternal(marker.getUid());
            manager.close();
            return marker;
        }
    }

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
        if (ModuleCalls.available()) {
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
        // DJL's named call reads the parameter list from the arrays' names, set for the call:
        // calls with the same parameters take turns
        synchronized (parameters.isEmpty() ? inputs.head() : parameters.get(0)) {
            return namedCall(inputs, parameters, training);
        }
    }

    private NDArray namedCall(NDList inputs, NDList parameters, boolean training) {
        NDList call = new NDList(parameters.size() + inputs.size() + 1);
        String[] names = new String[parameters.size() + inputs.size()];
        for (int i = 0; i < inputs.size(); i++) {
            NDArray input = inputs.get(i);
            names[i] = input.getName();
            input.setName("x" + i); // positional: a name that is none of DJL's patterns
            call.add(input);
        }
        for (int i = 0; i < parameters.size(); i++) {
            NDArray parameter = parameters.get(i);
            names[inputs.size() + i] = parameter.getName();
            parameter.setName("p[]");
            call.add(parameter);
        }
        if (!training) {
            call.add(InferenceMarker.ARRAY);
        }
        try {
            // "true": run under the thread's grad mode (DJL's false would turn autograd off)
            return UnoptimizedGraphs.get()
                    .run(() -> IValueUtils.forward(module, call, true).singletonOrThrow());
        } finally {
            for (int i = 0; i < names.length; i++) {
                call.get(i).setName(names[i]);
            }
        }
    }
}
