package io.github.djlamp.amp.it;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.optimizer.Adam;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.util.Pair;
import io.github.djlamp.amp.internal.DjlSeam;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Predicate;

/** Bit-exact copies of training state, to prove a skipped step changed nothing. */
final class Snapshots {

    private Snapshots() {}

    /** The raw bits of every parameter of a block, by parameter name. */
    static Map<String, Bits> weights(Block block) {
        return weights(block, p -> true);
    }

    /** The raw bits of the parameters of a block that {@code which} accepts, by name. */
    static Map<String, Bits> weights(Block block, Predicate<Parameter> which) {
        Map<String, Bits> result = new TreeMap<>();
        for (Pair<String, Parameter> p : block.getParameters()) {
            if (which.test(p.getValue())) {
                result.put(p.getKey(), Bits.of(p.getValue().getArray()));
            }
        }
        return result;
    }

    /**
     * Adam's private state, read through {@link DjlSeam}: its first and second moments ({@code
     * means}, {@code variances}) and {@link Optimizer}'s {@code updateCounts} and {@code
     * numUpdate}.
     */
    static AdamState adam(Optimizer optimizer) {
        if (!(optimizer instanceof Adam)) {
            throw new IllegalArgumentException("not an Adam: " + optimizer);
        }
        return new AdamState(
                moments(optimizer, Adam.class, "means"),
                moments(optimizer, Adam.class, "variances"),
                new TreeMap<>(Snapshots.<Map<String, Integer>>field(optimizer, "updateCounts")),
                Snapshots.<Integer>field(optimizer, "numUpdate"));
    }

    /**
     * A momentum optimizer's private per-parameter state ({@code momentumStates} of DJL's Sgd or
     * Nag), read through reflection.
     */
    static Map<String, Map<Device, NDArray>> momentumStates(Optimizer optimizer) {
        return readField(optimizer.getClass(), optimizer, "momentumStates");
    }

    private static Map<String, Bits> moments(Optimizer optimizer, Class<?> owner, String name) {
        Map<String, Map<Device, NDArray>> state = readField(owner, optimizer, name);
        Map<String, Bits> result = new TreeMap<>();
        for (Map.Entry<String, Map<Device, NDArray>> e : state.entrySet()) {
            for (Map.Entry<Device, NDArray> d : e.getValue().entrySet()) {
                result.put(e.getKey() + "@" + d.getKey(), Bits.of(d.getValue()));
            }
        }
        return result;
    }

    private static <T> T field(Optimizer optimizer, String name) {
        return readField(Optimizer.class, optimizer, name);
    }

    @SuppressWarnings("unchecked")
    private static <T> T readField(Class<?> owner, Object target, String name) {
        return (T) DjlSeam.read(target, owner, name);
    }

    /** The raw IEEE bits of an fp32 array. */
    static final class Bits {
        final int[] bits;

        private Bits(int[] bits) {
            this.bits = bits;
        }

        static Bits of(NDArray array) {
            float[] values = array.toFloatArray();
            int[] bits = new int[values.length];
            for (int i = 0; i < values.length; i++) {
                bits[i] = Float.floatToRawIntBits(values[i]);
            }
            return new Bits(bits);
        }

        boolean allFinite() {
            for (int b : bits) {
                if (!Float.isFinite(Float.intBitsToFloat(b))) {
                    return false;
                }
            }
            return true;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Bits && java.util.Arrays.equals(bits, ((Bits) o).bits);
        }

        @Override
        public int hashCode() {
            return java.util.Arrays.hashCode(bits);
        }

        @Override
        public String toString() {
            return bits.length + " values, hash " + hashCode();
        }
    }

    /** Adam's moments, update counts and update number. */
    static final class AdamState {
        final Map<String, Bits> means;
        final Map<String, Bits> variances;
        final Map<String, Integer> updateCounts;
        final int numUpdate;

        AdamState(
                Map<String, Bits> means,
                Map<String, Bits> variances,
                Map<String, Integer> updateCounts,
                int numUpdate) {
            this.means = means;
            this.variances = variances;
            this.updateCounts = updateCounts;
            this.numUpdate = numUpdate;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof AdamState)) {
                return false;
            }
            AdamState s = (AdamState) o;
            return means.equals(s.means)
                    && variances.equals(s.variances)
                    && updateCounts.equals(s.updateCounts)
                    && numUpdate == s.numUpdate;
        }

        @Override
        public int hashCode() {
            return java.util.Objects.hash(means, variances, updateCounts, numUpdate);
        }

        @Override
        public String toString() {
            return "Adam[means="
                    + means
                    + ", variances="
                    + variances
                    + ", updateCounts="
                    + updateCounts
                    + ", numUpdate="
                    + numUpdate
                    + "]";
        }
    }
}
