package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Checks a 16-bit convolution or linear kernel against fp32 before its result is used, once per
 * operation signature for the life of the process ({@link KernelVerdicts}), and on this machine and
 * libraries for later processes ({@link RememberedVerdicts}).
 *
 * <p>The check runs the layer three times on the layer's own input and weights, rounded to the
 * 16-bit format first so that every side sees the same values: in fp32 (the reference), in fp32 on
 * the absolute values (the sums S that {@link ErrorBound} scales with), and in 16 bits in each
 * candidate memory layout until one agrees. Each run goes forward and backward from a fixed
 * cotangent, so the output, the weight and bias gradients and, where the input needs one, the input
 * gradient are all compared. The 16-bit run is at the input's full shape, the signature training
 * runs; the two fp32 runs cover {@link SampledRows} of the batch (four samples, the first and the
 * last among them), the only rows the cotangent reaches, so that a check costs about one 16-bit
 * pass of the layer however large the batch, where fp32 costs more than 16 bits. Outside those rows
 * the 16-bit input gradient must be exactly zero. The fp32 reference is itself compared, on a few
 * sampled outputs, with a direct double-precision sum ({@link DirectSum}): where fp32 is wrong too,
 * no fallback helps and the verdict says the platform is unsound.
 *
 * <p>Nothing of the caller's is touched: the runs use detached copies, a cotangent made without the
 * engine's random generator, and a manager closed before this returns.
 */
public final class KernelVerifier {

    private static final Logger logger = LoggerFactory.getLogger(KernelVerifier.class);

    /**
     * The version of the check's method: a change to what the check decides (its error bound, its
     * cases) must change it, so that verdicts kept on disk by an older check are not reused.
     * Version 2: operands that are not finite or zero throughout are replaced in the check's copy
     * (version 1 kept a NaN batch's verdict as "platform unsound"), and a TorchScript module's
     * gradients are compared.
     */
    public static final int CHECK_VERSION = 2;

    /** The cure verified on the platforms where oneDNN's kernels were found wrong. */
    public static final String CPU_CURE = "ONEDNN_MAX_CPU_ISA=AVX2";

    private final AmpBackend backend;

    private final AtomicBoolean checksRun = new AtomicBoolean();

    /**
     * Creates a verifier over an engine layer.
     *
     * @param backend the engine layer that runs the kernels
     */
    public KernelVerifier(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Returns whether djl-amp checks this block's kernel: DJL's convolutions and linear layers, the
     * blocks whose 16-bit kernels are matrix multiplications over cast weights.
     *
     * @param block a block that computes in 16 bits
     * @return true for {@link Convolution} and {@link Linear}
     */
    public static boolean covers(Block block) {
        return block instanceof Convolution || block instanceof Linear;
    }

    /**
     * Returns the verdict for a layer at its input's signature, checking the kernel first if no
     * layer of this process has run that signature yet. A failure is logged as one WARN per
     * signature.
     *
     * @param block the layer, a block {@link #covers} accepts
     * @param path the layer's path in the model, for the report
     * @param input the layer's input, any precision
     * @param masters the store holding the layer's fp32 parameters
     * @param training whether the caller trains (which copy of the parameters to read)
     * @param precision the 16-bit precision to check
     * @param candidates the memory layouts to try, in order of preference
     * @return the verdict
     */
    public KernelVerdict verdict(
            Block block,
            String path,
            NDArray input,
            ParameterStore masters,
            boolean training,
            Precision precision,
            List<MemoryLayout> candidates) {
        return verdict(
                block,
                path,
                input,
                masters,
                training,
                precision,
                candidates,
                backend.requiresGradient(input));
    }

    /**
     * Returns the verdict for a layer at its input's signature, as {@link #verdict(Block, String,
     * NDArray, ParameterStore, boolean, Precision, List)} does, with whether the check covers the
     * input's gradient said by the caller: a forward without recording that a recomputation with
     * recording repeats checks the kernels the recomputation will run.
     *
     * @param block the layer, a block {@link #covers} accepts
     * @param path the layer's path in the model, for the report
     * @param input the layer's input, any precision
     * @param masters the store holding the layer's fp32 parameters
     * @param training whether the caller trains (which copy of the parameters to read)
     * @param precision the 16-bit precision to check
     * @param candidates the memory layouts to try, in order of preference
     * @param inputGradient whether the input's gradient is computed, so its kernel is checked too
     * @return the verdict
     */
    public KernelVerdict verdict(
            Block block,
            String path,
            NDArray input,
            ParameterStore masters,
            boolean training,
            Precision precision,
            List<MemoryLayout> candidates,
            boolean inputGradient) {
        Device device = input.getDevice();
        Map<Parameter, NDArray> parameters = new IdentityHashMap<>();
        List<Parameter> order = new ArrayList<>();
        for (Pair<String, Parameter> pair : block.getDirectParameters()) {
            NDArray value = masters.getValue(pair.getValue(), device, training);
            if (value != null) {
                parameters.put(pair.getValue(), value);
                order.add(pair.getValue());
            }
        }
        String operation = describe(block, order, parameters);
        String signature =
                operation
                        + "|"
                        + input.getShape()
                        + "|"
                        + device
                        + "|"
                        + precision
                        + "|"
                        + inputGradient
                        + "|"
                        + candidates;
        return verdictOf(
                signature,
                path,
                "layer",
                () ->
                        check(
                                block,
                                operation,
                                input,
                                order,
                                parameters,
                                inputGradient,
                                precision,
                                candidates));
    }

    /**
     * Returns the verdict for a 16-bit batched matrix product of two activations, {@code
     * left.matMul(right)} (attention's two products), checking it first if no product of this
     * process has run that signature yet. A failure is logged as one WARN per signature, and the
     * product then runs in fp32.
     *
     * @param path where the product is in the model, for the report
     * @param what which product, for the report (for example "attention scores")
     * @param left the left operand, (..., M, K), any precision
     * @param right the right operand, (..., K, N), with the same leading axes
     * @param precision the 16-bit precision to check
     * @param gradients whether the operands' gradients are computed, so their kernels are checked
     * @return the verdict
     */
    public KernelVerdict productVerdict(
            String path,
            String what,
            NDArray left,
            NDArray right,
            Precision precision,
            boolean gradients) {
        Device device = left.getDevice();
        String operation = productOperation(what, right.getShape());
        String signature =
                productSignature(operation, left.getShape(), device, precision, gradients);
        return verdictOf(
                signature,
                path,
                "product",
                () ->
                        new ProductCheck(backend)
                                .check(operation, left, right, gradients, precision));
    }

    /**
     * Returns the verdict {@link #productVerdict} would return where its signature has been checked
     * already, without checking it: null where it has not.
     *
     * @param path where the product is, for the report
     * @param what which product
     * @param left the left operand
     * @param right the right operand
     * @param precision the precision it computes in
     * @param gradients whether the check covered the operands' gradients
     * @return the verdict, or null where this signature has not been checked
     */
    public KernelVerdict productVerdictIfChecked(
            String path,
            String what,
            NDArray left,
            NDArray right,
            Precision precision,
            boolean gradients) {
        String operation = productOperation(what, right.getShape());
        String signature =
                productSignature(
                        operation, left.getShape(), left.getDevice(), precision, gradients);
        if (KernelVerdicts.get(processKey(signature)) == null) {
            return null;
        }
        return verdictOf(
                signature,
                path,
                "product",
                () -> {
                    throw new IllegalStateException("checked already: " + signature);
                });
    }

    /**
     * Returns the verdict for a block that the engine's own autocast runs ({@link StageCheck}) at
     * its inputs' signature, checking it first if no block of this process has run that signature
     * yet. A failure is logged as one WARN per signature; the block then runs in fp32.
     *
     * @param block the block, as the engine's autocast would run it
     * @param path the block's path in the model, for the report
     * @param inputs its inputs, any precision
     * @param masters the store holding its fp32 parameters
     * @param training whether the caller trains (which copy of the parameters to read)
     * @param precision the 16-bit precision to check
     * @param params the forward's extra parameters, handed on
     * @return the verdict
     * @throws ai.djl.engine.EngineException when the engine cannot run the block under its autocast
     */
    public KernelVerdict stageVerdict(
            Block block,
            String path,
            NDList inputs,
            ParameterStore masters,
            boolean training,
            Precision precision,
            PairList<String, Object> params) {
        StringBuilder operation =
                new StringBuilder("engine autocast (").append(block.getClass().getSimpleName());
        for (Pair<String, Parameter> pair : block.getParameters()) {
            Parameter parameter = pair.getValue();
            Shape shape = parameter.isInitialized() ? parameter.getArray().getShape() : null;
            operation.append(", ").append(pair.getKey()).append(' ').append(shape);
        }
        operation.append(')');
        StringBuilder signature = new StringBuilder(operation).append('|');
        for (NDArray input : inputs) {
            signature
                    .append(input.getShape())
                    .append(input.getDataType())
                    .append(backend.requiresGradient(input) ? "+gradient " : " ");
        }
        signature.append('|').append(inputs.head().getDevice()).append('|').append(precision);
        String what = operation.toString();
        return verdictOf(
                signature.toString(),
                path,
                "block",
                () ->
                        new StageCheck(backend)
                                .check(block, what, inputs, masters, training, precision, params));
    }

    /** A signature's key among this process's verdicts: per backend instance. */
    private String processKey(String signature) {
        return System.identityHashCode(backend) + "|" + signature;
    }

    /**
     * The verdict of a signature, checked by {@code check} the first time (in this process, or on
     * this machine and libraries when a verdict is kept on disk); a defect is reported for the
     * first check, for a kept verdict's first use in this process, and for each new path that meets
     * it.
     */
    private KernelVerdict verdictOf(
            String signature, String path, String what, Supplier<KernelVerdict> check) {
        boolean[] created = new boolean[1];
        KernelVerdict verdict =
                KernelVerdicts.computeIfAbsent(
                        processKey(signature),
                        backend,
                        backend.getClass().getName() + "|" + signature,
                        () -> {
                            created[0] = true;
                            checksRun.set(true);
                            return check.get();
                        });
        boolean firstUse = created[0] || (verdict.isRemembered() && verdict.getPaths().isEmpty());
        boolean newPath = verdict.addPath(path);
        if (verdict.isDefectFound() && (firstUse || newPath)) {
            report(verdict, path.isEmpty() ? "root" : path, firstUse, what);
        }
        return verdict;
    }

    static String productOperation(String what, Shape right) {
        return "MatMul (" + what + ", right operand " + right + ")";
    }

    /** The key of a product's verdict in this process: its backend and its signature. */
    static String productKey(
            AmpBackend backend,
            String operation,
            Shape left,
            Device device,
            Precision precision,
            boolean gradients) {
        return System.identityHashCode(backend)
                + "|"
                + productSignature(operation, left, device, precision, gradients);
    }

    /** The signature of a product's verdict: one check per signature. */
    private static String productSignature(
            String operation, Shape left, Device device, Precision precision, boolean gradients) {
        return operation + "|" + left + "|" + device + "|" + precision + "|" + gradients;
    }

    /**
     * Returns whether this verifier checked a kernel since the last call: what the check made and
     * freed may then be given back to the system ({@code AmpBackend.releaseFreedMemory}).
     *
     * @return true once after one or more checks
     */
    public boolean takeChecksRun() {
        return checksRun.getAndSet(false);
    }

    private void report(KernelVerdict verdict, String path, boolean first, String what) {
        if (!first) {
            logger.info(
                    "djl-amp: '{}' has the signature of a kernel found wrong before; it runs {}",
                    path,
                    verdict.describeChoice());
            return;
        }
        String now =
                switch (verdict.getOutcome()) {
                    case OTHER_LAYOUT -> "it now runs in " + verdict.describeChoice();
                    case FP32_FALLBACK -> "this " + what + " now runs in fp32 at this shape";
                    case PLATFORM_UNSOUND ->
                            "fp32 itself is wrong here, so no fallback helps: the platform is"
                                    + " unsound. On a CPU, restart the JVM with "
                                    + CPU_CURE
                                    + " in the environment (oneDNN's AVX-512 kernels are wrong on"
                                    + " some hypervisors; PyTorch issue 163347)";
                    case NOT_CHECKED -> "it runs unverified";
                    case VERIFIED ->
                            throw new IllegalStateException(
                                    "A verified kernel has no defect to report: " + verdict);
                };
        if (verdict.getFindings().stream().anyMatch(f -> f.startsWith(StageCheck.FP16_RANGE))) {
            logger.warn(
                    "djl-amp: '{}' ({}, input {}, {}) does not fit fp16's range: {}; {}. bf16 runs"
                            + " it in 16 bits with fp32's range.",
                    path,
                    verdict.getOperation(),
                    verdict.getInputShape(),
                    verdict.getDevice(),
                    String.join("; ", verdict.getFindings()),
                    now);
            return;
        }
        logger.warn(
                "djl-amp: the {} kernel of '{}' ({}, input {}, {}) {}: {}; {}. Check the"
                        + " platform and its cure with 'mvn -B -q -pl amp-doctor -am compile"
                        + " exec:java@platform-check' (PlatformCheck.run() from Java).",
                verdict.getPrecision().canonicalName(),
                path,
                verdict.getOperation(),
                verdict.getInputShape(),
                verdict.getDevice(),
                verdict.getOutcome() == KernelVerdict.Outcome.NOT_CHECKED
                        ? "could not be checked"
                        : "is wrong",
                String.join("; ", verdict.getFindings()),
                now);
    }

    private KernelVerdict check(
            Block block,
            String operation,
            NDArray input,
            List<Parameter> order,
            Map<Parameter, NDArray> parameters,
            boolean inputGradient,
            Precision precision,
            List<MemoryLayout> candidates) {
        Device device = input.getDevice();
        Shape inputShape = input.getShape();
        SampledRows rows = SampledRows.of(block, inputShape);
        Shape sampledShape = rows.shapeOf(inputShape);
        List<String> findings = new ArrayList<>();
        try (NDManager scratch = input.getManager().newSubManager()) {
            NDArray detachedInput = FiniteOperands.of(input, backend, scratch);
            NDList reference = new NDList();
            reference.add(rounded(backend, rows.take(detachedInput), precision, scratch));
            for (Parameter parameter : order) {
                NDArray weight = FiniteOperands.of(parameters.get(parameter), backend, scratch);
                reference.add(rounded(backend, weight, precision, scratch));
            }
            Shape outputShape = block.getOutputShapes(new Shape[] {sampledShape})[0];
            NDArray unrounded = cotangent(outputShape, scratch);
            NDArray cotangent = rounded(backend, unrounded, precision, scratch);
            unrounded.close();
            Function<NDList, NDArray> layer = leaves -> forward(block, order, leaves, scratch);
            NDList expected;
            NDList sums;
            try {
                NDList[] passes = fp32Passes(backend, device, layer, reference, cotangent, scratch);
                expected = passes[0];
                sums = passes[1];
            } catch (RuntimeException e) {
                findings.add("the fp32 reference could not run: " + e.getMessage());
                return verdict(
                        block,
                        operation,
                        inputShape,
                        device,
                        precision,
                        KernelVerdict.Outcome.NOT_CHECKED,
                        candidates.get(0),
                        findings);
            }
            String unsound = LayerMath.checkReference(block, reference, expected.get(0), backend);
            if (unsound != null) {
                findings.add(unsound);
                return verdict(
                        block,
                        operation,
                        inputShape,
                        device,
                        precision,
                        KernelVerdict.Outcome.PLATFORM_UNSOUND,
                        candidates.get(0),
                        findings);
            }
            long[] reductions =
                    LayerMath.reductionLengths(block, sampledShape, outputShape, order.size());
            for (MemoryLayout layout : candidates) {
                String failure;
                // a layout's casts and results go before the next layout is tried
                try (NDManager attempt = scratch.newSubManager()) {
                    // the 16-bit kernel runs at the full shape, training's signature; the cotangent
                    // reaches the sampled rows only (rounding to 16 bits and back changes no
                    // 16-bit value, so the whole input is cast as it is)
                    NDList low = new NDList();
                    low.add(backend.cast(detachedInput, precision, layout, attempt));
                    for (NDArray array : reference.subNDList(1)) {
                        low.add(backend.cast(array, precision, layout, attempt));
                    }
                    NDArray lowCotangent = backend.cast(cotangent, precision, layout, attempt);
                    NDList actual =
                            backend.valueAndGradients(
                                    leaves -> rows.take(forward(block, order, leaves, attempt)),
                                    low,
                                    lowCotangent,
                                    attempt);
                    failure =
                            inputGradient
                                    ? rows.gradientOutside(actual.get(1), "input gradient", backend)
                                    : null;
                    if (failure == null) {
                        actual.set(1, rows.take(actual.get(1)));
                        failure =
                                Comparison.firstFailure(
                                        actual,
                                        expected,
                                        sums,
                                        names(order),
                                        reductions,
                                        inputGradient,
                                        precision,
                                        backend);
                    }
                } catch (RuntimeException e) {
                    failure = "the kernel failed: " + e.getMessage();
                }
                if (failure == null) {
                    KernelVerdict.Outcome outcome =
                            layout == candidates.get(0)
                                    ? KernelVerdict.Outcome.VERIFIED
                                    : KernelVerdict.Outcome.OTHER_LAYOUT;
                    return verdict(
                            block,
                            operation,
                            inputShape,
                            device,
                            precision,
                            outcome,
                            layout,
                            findings);
                }
                findings.add(layoutName(layout) + ": " + failure);
            }
            return verdict(
                    block,
                    operation,
                    inputShape,
                    device,
                    precision,
                    KernelVerdict.Outcome.FP32_FALLBACK,
                    null,
                    findings);
        }
    }

    private static KernelVerdict verdict(
            Block block,
            String operation,
            Shape inputShape,
            Device device,
            Precision precision,
            KernelVerdict.Outcome outcome,
            MemoryLayout layout,
            List<String> findings) {
        return new KernelVerdict(
                operation, inputShape, device, precision, outcome, layout, findings);
    }

    static String layoutName(MemoryLayout layout) {
        return layout == MemoryLayout.CHANNELS_LAST ? "channels-last" : "contiguous";
    }

    private static List<String> names(List<Parameter> order) {
        List<String> names = new ArrayList<>();
        names.add("output");
        names.add("input gradient");
        for (Parameter parameter : order) {
            names.add(parameter.getName() + " gradient");
        }
        return names;
    }

    /**
     * The fp32 passes of a check, through the engine's reference pass ({@link
     * AmpBackend#referencePass}): the values and gradients of {@code function} on {@code
     * reference}, then the sums its error bound scales with ({@link #absoluteSums}).
     */
    static NDList[] fp32Passes(
            AmpBackend backend,
            Device device,
            Function<NDList, NDArray> function,
            NDList reference,
            NDArray cotangent,
            NDManager scratch) {
        return backend.referencePass(
                device,
                () ->
                        new NDList[] {
                            backend.valueAndGradients(function, reference, cotangent, scratch),
                            absoluteSums(backend, function, reference, cotangent, scratch)
                        });
    }

    /**
     * The sums S the error bound scales with: {@code layer} forward and backward on the absolute
     * values of its inputs and of the cotangent. The absolute values go once their sums are made:
     * as large as the sampled input.
     */
    static NDList absoluteSums(
            AmpBackend backend,
            Function<NDList, NDArray> layer,
            NDList inputs,
            NDArray cotangent,
            NDManager scratch) {
        try (NDManager magnitudes = scratch.newSubManager()) {
            NDList absolute = new NDList();
            for (NDArray array : inputs) {
                NDArray magnitude = array.abs();
                magnitude.attach(magnitudes);
                absolute.add(magnitude);
            }
            NDArray cotangentMagnitude = cotangent.abs();
            cotangentMagnitude.attach(magnitudes);
            return backend.valueAndGradients(layer, absolute, cotangentMagnitude, scratch);
        }
    }

    /**
     * Returns {@code array} rounded to {@code precision} and back to fp32, on {@code scratch}; what
     * it takes on the way goes at once (for a layer's input, as large as the input).
     */
    static NDArray rounded(
            AmpBackend backend, NDArray array, Precision precision, NDManager scratch) {
        try (NDManager way = scratch.newSubManager()) {
            NDArray detached = array.stopGradient();
            detached.attach(way);
            NDArray low = backend.cast(detached, precision, MemoryLayout.CONTIGUOUS, way);
            NDArray result = backend.cast(low, Precision.FP32, MemoryLayout.CONTIGUOUS, way);
            result.attach(scratch);
            return result;
        }
    }

    /**
     * A fixed cotangent in [-1, 1): the fractional parts of multiples of the plastic number's
     * inverse, made without the engine's random generator so that a check changes no random draw of
     * the user's. Only the result stays on {@code scratch}.
     */
    static NDArray cotangent(Shape shape, NDManager scratch) {
        try (NDManager way = scratch.newSubManager()) {
            NDArray steps = way.arange(0f, (float) shape.size(), 1f).mul(0.7548776662466927f);
            NDArray result = steps.sub(steps.floor()).mul(2f).sub(1f).reshape(shape);
            result.attach(scratch);
            return result;
        }
    }

    private static NDArray forward(
            Block block, List<Parameter> order, NDList leaves, NDManager scratch) {
        Map<Parameter, NDArray> values = new IdentityHashMap<>();
        for (int i = 0; i < order.size(); i++) {
            values.put(order.get(i), leaves.get(i + 1));
        }
        NDArray output =
                block.forward(
                                new FixedParameterStore(scratch, values),
                                new NDList(leaves.get(0)),
                                false)
                        .singletonOrThrow();
        return output;
    }

    private static String describe(
            Block block, List<Parameter> order, Map<Parameter, NDArray> values) {
        StringBuilder sb = new StringBuilder(block.getClass().getSimpleName());
        String separator = " (";
        if (block instanceof Convolution) {
            Convolution conv = (Convolution) block;
            sb.append(" (kernel ")
                    .append(conv.getKernelShape())
                    .append(", stride ")
                    .append(conv.getStride())
                    .append(", padding ")
                    .append(conv.getPadding())
                    .append(", dilation ")
                    .append(conv.getDilation())
                    .append(", groups ")
                    .append(conv.getGroups());
            separator = ", ";
        }
        for (Parameter parameter : order) {
            sb.append(separator)
                    .append(parameter.getName())
                    .append(' ')
                    .append(values.get(parameter).getShape());
            separator = ", ";
        }
        return sb.append(separator.equals(", ") ? ")" : "").toString();
    }
}
