package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Checks a block that the engine's own autocast runs (an LSTM, a TorchScript module, a composite
 * such as DJL's DeepAR) against fp32 before its 16-bit result is used: the kernels inside are the
 * engine's, out of reach of the per-layer {@link KernelVerifier} check, and as wrong as any where
 * the platform's are.
 *
 * <p>The block runs twice, forward and backward from one fixed cotangent, on detached copies of its
 * floating inputs and of its parameters (the inputs' gradients checked where training computes
 * them), both rounded to the 16-bit format first so that each run sees the same values: in fp32,
 * and under the engine's autocast. Both run in inference mode (no dropout drawn, no running
 * statistics updated), so the check changes nothing of the caller's; its backward returns the
 * copies' gradients without adding into any parameter's. A block that computes with parameter
 * arrays of its own ({@link AmpBackend#computesWithOwnParameters}: a TorchScript module, alone or
 * inside a block of the user's own) is differentiated with respect to those, unrounded, and runs as
 * its recording stand-in ({@link AmpBackend#recordingForCheck}, {@link CheckedTree}), since its
 * inference forward records nothing. The outputs and the gradients of every input and parameter are
 * compared in the 2-norm, relative to fp32's. In fp16, where a gradient overflows, both runs go
 * again from a cotangent scaled down to where fp32's gradients fit fp16 (then halved while fp16's
 * still overflow), as dynamic loss scaling backs off in training; where no smaller cotangent helps,
 * fp16 overflows in the forward pass and the block runs in fp32.
 *
 * <p>The bound is measured, not derived as {@link ErrorBound}'s is for one product: the error of a
 * composite of many operations grows with its depth and its conditioning, in ways its own code
 * decides (TabNet's sparsemax turns rounding into 5-7% of some gradients, an LSTM's stays under 1%
 * in bf16). Each value may be off by {@value #UNITS} units of the format's rounding, or by {@value
 * #SPREADS} times what fp32 itself moves when the inputs and parameters move by that rounding (a
 * third fp32 run, made only where the first allowance is passed). A wrong kernel, tens of percent
 * off as oneDNN's were on the machines of issue 43, is far outside both.
 */
final class StageCheck {

    /** The error always allowed, in units of the format's rounding (2^-8 bf16, 2^-11 fp16). */
    static final int UNITS = 8;

    /**
     * The error allowed beyond that, in multiples of fp32's own spread at the format's rounding.
     */
    static final int SPREADS = 16;

    /** How a finding that fp16's range, not a kernel, fell short begins. */
    static final String FP16_RANGE = "fp16's gradients are not finite at any cotangent scale";

    private final AmpBackend backend;

    StageCheck(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Runs the check. An exception of the 16-bit run is the engine's refusal and is thrown for the
     * caller to handle as it handles its own run's; one of the fp32 run makes the verdict {@code
     * NOT_CHECKED}.
     */
    KernelVerdict check(
            Block block,
            String operation,
            NDList inputs,
            ParameterStore masters,
            boolean training,
            Precision precision,
            PairList<String, Object> params) {
        Device device = inputs.head().getDevice();
        List<String> findings = new ArrayList<>();
        boolean recording = backend.setRecording(true);
        try (NDManager scratch = inputs.head().getManager().newSubManager()) {
            List<String> names = new ArrayList<>();
            NDList rounded = new NDList();
            NDList call = new NDList(inputs.size());
            List<Integer> differentiated = new ArrayList<>();
            for (int i = 0; i < inputs.size(); i++) {
                NDArray input = inputs.get(i);
                if (backend.precisionOf(input) == null) {
                    call.add(input);
                    continue;
                }
                NDArray value =
                        KernelVerifier.rounded(
                                backend,
                                FiniteOperands.of(input, backend, scratch),
                                precision,
                                scratch);
                call.add(value);
                // the gradient of an input training computes none of (the data) is not checked
                if (backend.requiresGradient(input)) {
                    differentiated.add(i);
                    rounded.add(value);
                    names.add("input " + i + " gradient");
                }
            }
            // a module that computes with its own weights is differentiated with respect to
            // them, as they are (their gradients returned, not added into theirs): after the
            // weights the parameter store hands out
            Set<Parameter> own = CheckedTree.ownParameters(block, backend);
            List<Parameter> parameters = new ArrayList<>();
            List<String> ownNames = new ArrayList<>();
            NDList ownValues = new NDList();
            List<Parameter> ownParameters = new ArrayList<>();
            for (Pair<String, Parameter> pair : block.getParameters()) {
                Parameter parameter = pair.getValue();
                boolean held = own.contains(parameter);
                NDArray value = null;
                if (parameter.requiresGradient()) {
                    value =
                            held
                                    ? parameter.getArray()
                                    : masters.getValue(parameter, device, training);
                }
                if (value == null || backend.precisionOf(value) == null) {
                    continue;
                }
                if (held) {
                    ownParameters.add(parameter);
                    ownValues.add(value);
                    ownNames.add("'" + pair.getKey() + "' gradient");
                } else {
                    parameters.add(parameter);
                    rounded.add(
                            KernelVerifier.rounded(
                                    backend,
                                    FiniteOperands.of(value, backend, scratch),
                                    precision,
                                    scratch));
                    names.add("'" + pair.getKey() + "' gradient");
                }
            }
            int ownFrom = ownParameters.isEmpty() ? Integer.MAX_VALUE : rounded.size();
            parameters.addAll(ownParameters);
            rounded.addAll(ownValues);
            names.addAll(ownNames);
            Block checked;
            try {
                checked = CheckedTree.of(block, backend);
            } catch (ReflectiveOperationException | RuntimeException e) {
                findings.add(
                        "it cannot be copied to run a recording stand-in of a module it holds ("
                                + e
                                + ")");
                return verdict(
                        operation,
                        inputs,
                        device,
                        precision,
                        KernelVerdict.Outcome.NOT_CHECKED,
                        findings);
            }
            StageRun run =
                    new StageRun(
                            backend,
                            checked,
                            call,
                            differentiated,
                            parameters,
                            rounded,
                            ownFrom,
                            params,
                            scratch);
            StageRun.Wrapping autocast =
                    forward -> backend.withEngineAutocast(device, precision, forward);
            float scale = 1f;
            NDList expected;
            try {
                expected = run.valuesAndGradients(precision, null, scale);
            } catch (RuntimeException e) {
                findings.add("the fp32 reference could not run: " + e.getMessage());
                return verdict(
                        operation,
                        inputs,
                        device,
                        precision,
                        KernelVerdict.Outcome.NOT_CHECKED,
                        findings);
            }
            NDList actual = run.valuesAndGradients(precision, autocast, scale);
            // fp16's range, not its kernels: a gradient that overflows at a cotangent of 1 is what
            // dynamic loss scaling backs off from in training; the check backs off to the largest
            // power of two at which fp32's gradients fit, then halves, as the scaler would settle.
            // An overflow no smaller cotangent removes comes from the forward pass.
            if (precision == Precision.FP16
                    && gradientOverflows(actual, run.outputNames().size())) {
                float fitting = fittingScale(expected, run.outputNames().size());
                scale = fitting;
                do {
                    expected = run.valuesAndGradients(precision, null, scale);
                    actual = run.valuesAndGradients(precision, autocast, scale);
                    if (!gradientOverflows(actual, run.outputNames().size())) {
                        break;
                    }
                    scale *= 0.5f;
                } while (scale >= fitting * 0x1p-8f);
                if (gradientOverflows(actual, run.outputNames().size())) {
                    findings.add(
                            FP16_RANGE
                                    + " in the check's inference-mode pass (its forward pass overflows at"
                                    + " these inputs, as where normalization layers still hold"
                                    + " their initial running statistics, or divides 0 by 0): the"
                                    + " check cannot judge fp16's kernels here, fp16's range"
                                    + " falls short of it; bf16 has fp32's range");
                    return verdict(
                            operation,
                            inputs,
                            device,
                            precision,
                            KernelVerdict.Outcome.FP32_FALLBACK,
                            findings);
                }
            }
            List<String> allNames = new ArrayList<>(run.outputNames());
            allNames.addAll(names);
            double[] errors = relativeErrors(actual, expected);
            double floor = UNITS * ErrorBound.unitRoundoff(precision);
            double[] spread = null;
            for (int i = 0; i < errors.length; i++) {
                if (errors[i] <= floor) {
                    continue;
                }
                if (spread == null) {
                    // how far fp32 itself moves when its inputs move by the format's rounding
                    StageRun moved =
                            new StageRun(
                                    backend,
                                    checked,
                                    perturbed(call, precision, scratch),
                                    differentiated,
                                    parameters,
                                    perturbedBelow(rounded, ownFrom, precision, scratch),
                                    ownFrom,
                                    params,
                                    scratch);
                    spread =
                            relativeErrors(
                                    moved.valuesAndGradients(precision, null, scale), expected);
                }
                double bound = Math.max(floor, SPREADS * spread[i]);
                if (!(errors[i] <= bound)) {
                    findings.add(
                            String.format(
                                            "%s is %.3g off fp32's in the 2-norm, relative (allowed %.3g:"
                                                    + " fp32 moves %.3g when its inputs move by the"
                                                    + " format's rounding)",
                                            allNames.get(i), errors[i], bound, spread[i])
                                    + (scale < 1f
                                            ? String.format(
                                                    " at a cotangent scaled by 2^%d, where fp16's"
                                                            + " gradients stop overflowing: fp16's"
                                                            + " range may be what falls short here",
                                                    Math.getExponent(scale))
                                            : ""));
                    return verdict(
                            operation,
                            inputs,
                            device,
                            precision,
                            KernelVerdict.Outcome.FP32_FALLBACK,
                            findings);
                }
            }
            return verdict(
                    operation, inputs, device, precision, KernelVerdict.Outcome.VERIFIED, findings);
        } finally {
            backend.setRecording(recording);
        }
    }

    /**
     * {@link #perturbed} below {@code ownFrom}; a module's own weights from there stay as they are.
     */
    private NDList perturbedBelow(
            NDList values, int ownFrom, Precision precision, NDManager scratch) {
        int own = Math.min(ownFrom, values.size());
        NDList moved = perturbed(values.subNDList(0, own), precision, scratch);
        moved.addAll(values.subNDList(own));
        return moved;
    }

    /**
     * Each floating array of {@code values} times (1 + u p), u the format's rounding and p a fixed
     * pattern in [-1, 1): inputs that moved as far as rounding to the format moves them.
     */
    private NDList perturbed(NDList values, Precision precision, NDManager scratch) {
        NDList moved = new NDList(values.size());
        for (NDArray value : values) {
            if (backend.precisionOf(value) == null) {
                moved.add(value);
                continue;
            }
            NDArray pattern = KernelVerifier.cotangent(value.getShape(), scratch);
            NDArray result =
                    value.add(value.mul(pattern.mul((float) ErrorBound.unitRoundoff(precision))));
            result.attach(scratch);
            moved.add(result);
        }
        return moved;
    }

    private static KernelVerdict verdict(
            String operation,
            NDList inputs,
            Device device,
            Precision precision,
            KernelVerdict.Outcome outcome,
            List<String> findings) {
        return new KernelVerdict(
                operation,
                inputs.head().getShape(),
                device,
                precision,
                outcome,
                // as the layer check's verdicts: a fallback has no layout
                outcome == KernelVerdict.Outcome.FP32_FALLBACK ? null : MemoryLayout.CONTIGUOUS,
                findings);
    }

    /**
     * The largest power of two at most 1 that brings fp32's largest gradient (the values after the
     * first {@code outputs}) under 2^14, a quarter of fp16's largest value.
     */
    private float fittingScale(NDList expected, int outputs) {
        float largest = 0f;
        for (int i = outputs; i < expected.size(); i++) {
            NDArray value = expected.get(i);
            if (value.getShape().size() > 0) {
                largest = Math.max(largest, backend.readFloat(value.abs().max()));
            }
        }
        if (!(largest > 0x1p14f) || !Float.isFinite(largest)) {
            return 0.5f;
        }
        return Math.max(0x1p-24f, Math.scalb(1f, Math.getExponent(0x1p14f / largest)));
    }

    /** Whether a gradient (the values after the first {@code outputs}) holds a non-finite value. */
    private boolean gradientOverflows(NDList values, int outputs) {
        for (int i = outputs; i < values.size(); i++) {
            NDArray value = values.get(i);
            if (value.getShape().size() > 0
                    && !Float.isFinite(backend.readFloat(value.abs().max()))) {
                return true;
            }
        }
        return false;
    }

    /**
     * The 2-norm error of each value relative to fp32's: 0 where neither run's gradient reached it,
     * infinite where only one did or the value is not finite.
     */
    private double[] relativeErrors(NDList actual, NDList expected) {
        double[] errors = new double[expected.size()];
        for (int i = 0; i < expected.size(); i++) {
            NDArray reference = expected.get(i);
            NDArray value = actual.get(i);
            if (!reference.getShape().equals(value.getShape())) {
                errors[i] = Double.POSITIVE_INFINITY;
                continue;
            }
            if (reference.getShape().size() == 0) {
                continue; // neither run's gradient reached it
            }
            float scale = backend.readFloat(reference.norm());
            float error = backend.readFloat(value.sub(reference).norm());
            if (!Float.isFinite(scale)) {
                continue; // fp32 overflows too: nothing to compare with
            }
            double relative = scale > 0 ? error / scale : error;
            errors[i] = Float.isFinite(error) ? relative : Double.POSITIVE_INFINITY;
        }
        return errors;
    }
}
