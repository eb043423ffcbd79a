package io.github.djlamp.amp.verify;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One forward and backward of a {@link StageCheck}'s block on fresh leaves over the rounded values:
 * the inputs the check differentiates, then the parameters the store hands out, then (from {@code
 * ownFrom}) the arrays a module holds itself, as they are.
 */
final class StageRun {

    /**
     * How a run of the check calls the block's forward: as it is, or under the engine's autocast.
     */
    @FunctionalInterface
    interface Wrapping {
        NDList around(Supplier<NDList> forward);
    }

    private final AmpBackend backend;
    private final Block block;
    private final NDList inputs;
    private final List<Integer> differentiated;
    private final List<Parameter> parameters;
    private final NDList rounded;
    private final int ownFrom;
    private final PairList<String, Object> params;
    private final NDManager scratch;
    private final List<String> outputNames = new ArrayList<>();

    StageRun(
            AmpBackend backend,
            Block block,
            NDList inputs,
            List<Integer> differentiated,
            List<Parameter> parameters,
            NDList rounded,
            int ownFrom,
            PairList<String, Object> params,
            NDManager scratch) {
        this.backend = backend;
        this.block = block;
        this.inputs = inputs;
        this.differentiated = differentiated;
        this.parameters = parameters;
        this.rounded = rounded;
        this.ownFrom = ownFrom;
        this.params = params;
        this.scratch = scratch;
    }

    List<String> outputNames() {
        return outputNames;
    }

    /**
     * The floating outputs, then the gradient of each rounded value (empty where none reached it),
     * as fp32 on the scratch manager.
     */
    NDList valuesAndGradients(Precision precision, Wrapping wrapping, float scale) {
        try (NDManager way = scratch.newSubManager()) {
            NDList leaves = new NDList();
            for (int i = 0; i < rounded.size(); i++) {
                NDArray value = rounded.get(i);
                leaves.add(i >= ownFrom ? value : backend.detachedLeaf(value, way));
            }
            NDList call = new NDList(inputs.size());
            for (int i = 0; i < inputs.size(); i++) {
                int at = differentiated.indexOf(i);
                call.add(at >= 0 ? leaves.get(at) : inputs.get(i));
            }
            Map<Parameter, NDArray> values = new IdentityHashMap<>();
            for (int i = 0; i < parameters.size(); i++) {
                values.put(parameters.get(i), leaves.get(differentiated.size() + i));
            }
            Supplier<NDList> forward =
                    () -> block.forward(new FixedParameterStore(way, values), call, false, params);
            NDList outputs = wrapping == null ? forward.get() : wrapping.around(forward);
            for (NDArray output : outputs) {
                // a block may hand an input on as an output (d2l-java's decoders return the valid
                // lengths they were given): that array is the caller's, and the next run uses it
                if (!isInput(output, call)) {
                    output.attach(way);
                }
            }
            NDList floating = new NDList();
            NDList differentiable = new NDList();
            NDList cotangents = new NDList();
            outputNames.clear();
            for (int i = 0; i < outputs.size(); i++) {
                NDArray output = outputs.get(i);
                Precision computed = backend.precisionOf(output);
                if (computed == null) {
                    continue;
                }
                floating.add(output);
                outputNames.add("output " + i);
                if (!backend.requiresGradient(output)) {
                    continue; // reached by no leaf (DeepAR's scale): its value is compared
                }
                differentiable.add(output);
                NDArray unrounded = KernelVerifier.cotangent(output.getShape(), way).mul(scale);
                NDArray cotangent = KernelVerifier.rounded(backend, unrounded, precision, way);
                cotangents.add(backend.cast(cotangent, computed, MemoryLayout.CONTIGUOUS, way));
            }
            List<NDArray> gradients = new ArrayList<>();
            if (differentiable.isEmpty()) {
                for (int i = 0; i < leaves.size(); i++) {
                    gradients.add(null);
                }
            } else {
                gradients =
                        backend.backwardTo(differentiable, cotangents, leaves, new NDList(), way);
            }
            NDList results = new NDList();
            for (NDArray output : floating) {
                results.add(fp32(output));
            }
            for (NDArray gradient : gradients) {
                results.add(gradient == null ? scratch.create(new float[0]) : fp32(gradient));
            }
            return results;
        }
    }

    private static boolean isInput(NDArray array, NDList inputs) {
        for (NDArray input : inputs) {
            if (input == array) {
                return true;
            }
        }
        return false;
    }

    private NDArray fp32(NDArray array) {
        NDArray detached = array.stopGradient();
        NDArray result = backend.cast(detached, Precision.FP32, MemoryLayout.CONTIGUOUS, scratch);
        if (result == detached) {
            result.attach(scratch);
        }
        return result;
    }
}
