package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import ai.djl.pytorch.jni.IValueUtils;
import ai.djl.pytorch.jni.JniUtils;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.FusedOptimizerStep;
import io.github.djlamp.amp.spi.LearningRate;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.spi.UpdateCounter;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The loaded kernel module: typed Java calls onto the methods of {@link AmpKernelScript}.
 *
 * <p>Casts run through DJL's {@code IValueUtils.forward} with a method-name marker, which keeps
 * autograd recording; the other methods run through {@code IValueUtils.runMethod}, which runs under
 * inference mode (the kernels work in place and need no gradients).
 */
final class AmpKernels {

    private static final String METHOD_MARKER = "module_method:";

    private final NDManager manager;
    private final PtSymbolBlock module;
    private final Map<String, NDArray> castMarkers = new ConcurrentHashMap<>();
    private final NDArray backwardToMarker;

    private AmpKernels(NDManager manager, PtSymbolBlock module) {
        this.manager = manager;
        this.module = module;
        this.backwardToMarker = marker(AmpKernelScript.BACKWARD_TO);
        for (Precision precision : Precision.values()) {
            for (MemoryLayout layout : MemoryLayout.values()) {
                String method = AmpKernelScript.castMethod(precision, layout);
                castMarkers.put(method, marker(method));
                String all = AmpKernelScript.castAllMethod(precision, layout);
                castMarkers.put(all, marker(all));
            }
        }
    }

    /**
     * Generates the archive and loads it into the PyTorch engine.
     *
     * @return the loaded kernels, owning a base manager that lives as long as they do
     */
    static AmpKernels load() {
        NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        byte[] archive =
                TorchScriptArchive.build(AmpKernelScript.CLASS_NAME, AmpKernelScript.SOURCE);
        try {
            PtSymbolBlock module =
                    JniUtils.loadModule(
                            (PtNDManager) manager, new ByteArrayInputStream(archive), true, false);
            return new AmpKernels(manager, module);
        } catch (IOException | RuntimeException e) {
            manager.close();
            throw new AmpException(
                    "Could not load djl-amp's TorchScript kernels into DJL's PyTorch engine; "
                            + "check that ai.djl.pytorch:pytorch-engine matches the PyTorch natives "
                            + "(PyTorch "
                            + DjlSeam.TESTED_PYTORCH_VERSION
                            + "). "
                            + DjlSeam.versionReport()
                            + ".",
                    e);
        }
    }

    private NDArray marker(String method) {
        NDArray marker = manager.create(0f);
        marker.setName(METHOD_MARKER + method);
        return marker;
    }

    NDArray cast(PtNDArray array, Precision target, MemoryLayout layout) {
        NDArray marker = castMarkers.get(AmpKernelScript.castMethod(target, layout));
        return IValueUtils.forward(module, new NDList(array, marker), true).singletonOrThrow();
    }

    /**
     * Casts every array in one call, with recording on; the arrays travel as one TorchScript list,
     * their own names put back afterwards. The results land on the first array's manager.
     */
    NDList castAll(PtNDArray[] arrays, Precision target, MemoryLayout layout) {
        NDList call = new NDList(arrays.length + 1);
        String[] names = new String[arrays.length];
        for (int i = 0; i < arrays.length; i++) {
            names[i] = arrays[i].getName();
            arrays[i].setName("xs[]");
            call.add(arrays[i]);
        }
        call.add(castMarkers.get(AmpKernelScript.castAllMethod(target, layout)));
        try {
            return IValueUtils.forward(module, call, true);
        } finally {
            for (int i = 0; i < arrays.length; i++) {
                arrays[i].setName(names[i]);
            }
        }
    }

    /**
     * Runs {@code backward_to} with recording on (autograd.grad needs the graph); the arrays travel
     * as TorchScript lists named by DJL's list convention, their own names put back afterwards.
     */
    NDList backwardTo(
            NDList outputs, NDList gradients, NDList inputs, NDList parameters, NDManager manager) {
        NDList call = new NDList();
        List<String> names = new ArrayList<>();
        try (NDManager scratch = manager.newSubManager()) {
            add(call, names, outputs, "outputs[]");
            add(call, names, gradients, "grads[]");
            add(call, names, inputs, "wrt[]");
            add(call, names, parameters, "wrt[]");
            NDArray count = scratch.create((long) inputs.size());
            count.setName("n");
            call.add(count);
            call.add(backwardToMarker);
            try {
                NDList result = IValueUtils.forward(module, call, true);
                result.attach(manager);
                return result;
            } finally {
                for (int i = 0; i < names.size(); i++) {
                    call.get(i).setName(names.get(i));
                }
            }
        }
    }

    private static void add(NDList call, List<String> names, NDList arrays, String list) {
        for (NDArray array : arrays) {
            names.add(array.getName());
            array.setName(list);
            call.add(array);
        }
    }

    int dtypeCode(PtNDArray array) {
        try (IValue in = IValue.from(array);
                IValue out = IValueUtils.runMethod(module, "dtype_code", in)) {
            return (int) out.toLong();
        }
    }

    /**
     * Whether autograd tracks {@code array}: also true for the result of an operation on an array
     * that needs a gradient, where DJL's {@code hasGradient()} says false (it is true for leaves
     * only here).
     */
    boolean requiresGrad(PtNDArray array) {
        try (IValue in = IValue.from(array);
                IValue out = IValueUtils.runMethod(module, "requires_grad", in)) {
            return out.toBoolean();
        }
    }

    void unscale(PtNDArray[] gradients, PtNDArray foundInf, PtNDArray invScale) {
        try (IValue grads = IValue.listFrom(gradients);
                IValue found = IValue.from(foundInf);
                IValue inv = IValue.from(invScale);
                IValue out = IValueUtils.runMethod(module, "unscale_", grads, found, inv)) {
            // The kernel works in place; its result is None.
        }
    }

    void unscaleGeneric(PtNDArray[] gradients, PtNDArray foundInf, PtNDArray invScale) {
        try (IValue grads = IValue.listFrom(gradients);
                IValue found = IValue.from(foundInf);
                IValue inv = IValue.from(invScale);
                IValue out = IValueUtils.runMethod(module, "unscale_generic_", grads, found, inv)) {
            // In place; the result is None.
        }
    }

    /**
     * Reads the first element of an array as a float on the host. The host copy is made by the
     * kernel module and lands on a scope closed here: DJL's own read of a device array copies
     * through {@code toDevice}, which attaches the copy to a new sub-manager of the array's manager
     * that nothing closes.
     */
    float readFloat(PtNDArray array) {
        try (PtNDManager scope = (PtNDManager) manager.newSubManager(Device.cpu());
                IValue in = IValue.from(array);
                IValue out = IValueUtils.runMethod(module, "to_host_", in)) {
            return out.toTensor(scope).getFloat(0);
        }
    }

    /** Reads every element as floats on the host, like {@link #readFloat}. */
    float[] readFloats(PtNDArray array) {
        try (PtNDManager scope = (PtNDManager) manager.newSubManager(Device.cpu());
                IValue in = IValue.from(array);
                IValue out = IValueUtils.runMethod(module, "to_host_", in)) {
            return out.toTensor(scope).toFloatArray();
        }
    }

    /**
     * Runs a fused optimizer kernel ({@link FusedKernelScript}) on a step whose arrays are all
     * PyTorch's: one argument list for every kernel, in the order of the kernels' shared signature.
     *
     * @param settings the step's settings in the order the kernel takes them
     */
    void fusedStep(FusedOptimizerStep step, double[] settings) {
        List<IValue> arguments = new ArrayList<>();
        try {
            LearningRate rate = step.getLearningRate();
            UpdateCounter counter = step.getCounter();
            arguments.add(IValue.listFrom(pyTorch(step.getWeights())));
            arguments.add(IValue.listFrom(pyTorch(step.getGradients())));
            NDList state = new NDList();
            step.getState().forEach(state::addAll);
            arguments.add(IValue.listFrom(pyTorch(state)));
            arguments.add(IValue.listFrom(settings));
            arguments.add(IValue.from((double) step.getWeightDecay()));
            arguments.add(IValue.from((double) rate.getFixedValue()));
            arguments.add(rateTable(rate));
            arguments.add(IValue.from((double) rate.getFirstCount()));
            arguments.add(IValue.from((double) step.getAdjustment().getRescale()));
            arguments.add(IValue.from((double) step.getAdjustment().getClip()));
            arguments.add(IValue.from((PtNDArray) counter.getPerParameter()));
            arguments.add(IValue.from((PtNDArray) counter.getTrained()));
            arguments.add(IValue.from((PtNDArray) counter.getCount()));
            arguments.add(IValue.from((double) counter.getBeginNumUpdate()));
            arguments.add(IValue.from((PtNDArray) step.getFoundInf()));
            String method = FusedKernelScript.method(step.getKernel());
            // in place; the result is None
            IValueUtils.runMethod(module, method, arguments.toArray(new IValue[0])).close();
        } finally {
            arguments.forEach(IValue::close);
        }
    }

    private static PtNDArray[] pyTorch(NDList arrays) {
        PtNDArray[] result = new PtNDArray[arrays.size()];
        for (int i = 0; i < result.length; i++) {
            result[i] = (PtNDArray) arrays.get(i);
        }
        return result;
    }

    /** TorchScript has no None through DJL's IValue: an empty list stands for a fixed rate. */
    private static IValue rateTable(LearningRate learningRate) {
        return learningRate.isFixed()
                ? IValue.listFrom(new PtNDArray[0])
                : IValue.listFrom((PtNDArray) learningRate.getValues());
    }

    void updateScaleWithHysteresis(
            PtNDArray[] state, PtNDArray foundInf, double[] factors, long[] counts) {
        try (IValue scale = IValue.from(state[0]);
                IValue tracker = IValue.from(state[1]);
                IValue overflows = IValue.from(state[2]);
                IValue skipped = IValue.from(state[3]);
                IValue collapsed = IValue.from(state[4]);
                IValue found = IValue.from(foundInf);
                IValue growth = IValue.from(factors[0]);
                IValue backoff = IValue.from(factors[1]);
                IValue interval = IValue.from(counts[0]);
                IValue hysteresis = IValue.from(counts[1]);
                IValue min = IValue.from(factors[2]);
                IValue max = IValue.from(factors[3]);
                IValue out =
                        IValueUtils.runMethod(
                                module,
                                "update_scale_hysteresis_",
                                scale,
                                tracker,
                                overflows,
                                skipped,
                                collapsed,
                                found,
                                growth,
                                backoff,
                                interval,
                                hysteresis,
                                min,
                                max)) {
            // In place; the result is None.
        }
    }

    void copy(PtNDArray[] destinations, PtNDArray[] sources) {
        try (IValue dst = IValue.listFrom(destinations);
                IValue src = IValue.listFrom(sources);
                IValue out = IValueUtils.runMethod(module, "copy_", dst, src)) {
            // In place; the result is None.
        }
    }

    void restoreWhere(PtNDArray[] live, PtNDArray[] saved, PtNDArray foundInf) {
        try (IValue current = IValue.listFrom(live);
                IValue before = IValue.listFrom(saved);
                IValue found = IValue.from(foundInf);
                IValue out =
                        IValueUtils.runMethod(module, "restore_where_", current, before, found)) {
            // In place; the result is None.
        }
    }

    void zero(PtNDArray[] arrays) {
        try (IValue list = IValue.listFrom(arrays);
                IValue out = IValueUtils.runMethod(module, "zero_", list)) {
            // In place; the result is None.
        }
    }

    void updateScale(
            PtNDArray scale,
            PtNDArray growthTracker,
            PtNDArray foundInf,
            double growthFactor,
            double backoffFactor,
            int growthInterval) {
        try (IValue s = IValue.from(scale);
                IValue tracker = IValue.from(growthTracker);
                IValue found = IValue.from(foundInf);
                IValue growth = IValue.from(growthFactor);
                IValue backoff = IValue.from(backoffFactor);
                IValue interval = IValue.from((long) growthInterval);
                IValue out =
                        IValueUtils.runMethod(
                                module,
                                "update_scale_",
                                s,
                                tracker,
                                found,
                                growth,
                                backoff,
                                interval)) {
            // The kernel updates scale and growthTracker in place and returns scale.
        }
    }
}
