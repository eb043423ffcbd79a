package io.github.djlamp.amp.cast;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.AbstractEmbedding;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.BertMaskedLanguageModelBlock;
import ai.djl.nn.transformer.IdEmbedding;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.Precision;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * How much of a model's arithmetic computed in which precision in its first forward on a device:
 * the floating-point operations of its matrix products (convolutions, linear layers, attention
 * products, and the units djl-amp runs whole), counted from the shapes that ran.
 *
 * <p>Counted exactly for DJL's convolutions and linear layers (2 x output elements x weight
 * elements per output channel) and attention products; for a unit djl-amp runs whole (a block of
 * unknown content, a recurrent layer, a TorchScript module) estimated from its parameters: 2 x its
 * matrix-shaped weight elements x the positions of its input (rows, tokens or pixels), which is
 * exact for one linear map per position and only an upper bound where a convolution is inside
 * (strides and pooling shrink the positions it runs at): such a count is written "at most".
 * Elementwise work, normalization and pooling are not counted: they are not where 16 bits pay.
 */
public final class ArithmeticShare {

    /** Below this share of the arithmetic in 16 bits, the first forward logs a warning. */
    public static final double WARN_BELOW_LOW_SHARE = 0.5;

    private final Precision compute;
    private final Map<String, Unit> units = new LinkedHashMap<>();
    private volatile boolean deferred;

    ArithmeticShare(Precision compute) {
        this.compute = compute;
    }

    /** Records what a stage ran: its arithmetic, counted or estimated, in {@code ran}. */
    synchronized void record(
            String path, Block block, Precision ran, NDList inputs, NDList outputs) {
        long exact = exactFlops(block, inputs, outputs);
        boolean estimated = exact < 0;
        long flops = estimated ? estimatedFlops(block, inputs) : exact;
        if (flops > 0) {
            add(
                    path,
                    block.getClass().getSimpleName(),
                    ran,
                    flops,
                    estimated,
                    estimated && holdsConvolution(block));
        }
    }

    /**
     * Whether a convolution is in {@code block}'s tree: the estimate counts every weight at every
     * input position, and a strided convolution or one after pooling runs at fewer (DJL's YOLOv3
     * run as one unit at 64x64: 2014 GFLOP estimated, 6.18 counted layer by layer). A weight of
     * three or more axes is a convolution's kernel, which finds them in a TorchScript module too,
     * whose layers DJL does not list (a traced ResNet-18 at 64x64: 732 GFLOP estimated for about
     * 2.4 at batch 8).
     */
    private static boolean holdsConvolution(Block block) {
        for (Pair<String, Parameter> p : block.getParameters()) {
            Parameter parameter = p.getValue();
            if (parameter.isInitialized() && parameter.getArray().getShape().dimension() >= 3) {
                return true;
            }
        }
        return false;
    }

    /** Marks this count as not what later forwards run: the next forward counts again. */
    void defer() {
        deferred = true;
    }

    /** Whether a stage ran this forward otherwise than later ones will ({@link #defer}). */
    boolean isDeferred() {
        return deferred;
    }

    /** Records a product that is not a layer's, such as attention's. */
    synchronized void recordProduct(String path, String what, Precision ran, long flops) {
        add(path, what, ran, flops, false, false);
    }

    private void add(
            String path,
            String what,
            Precision ran,
            long flops,
            boolean estimated,
            boolean upperBound) {
        String key = (path.isEmpty() ? "(root)" : path) + (what.startsWith("(") ? " " + what : "");
        Unit unit = units.get(key);
        units.put(
                key,
                unit == null
                        ? new Unit(key, what, ran, flops, estimated, upperBound)
                        : new Unit(key, what, ran, unit.flops + flops, estimated, upperBound));
    }

    /**
     * 2 x output elements x weight elements per output channel; BERT's masked-language-model head
     * counted from its shapes; -1 for a block of other kind.
     */
    private static long exactFlops(Block block, NDList inputs, NDList outputs) {
        if (block instanceof BertMaskedLanguageModelBlock && inputs.size() == 3) {
            return maskedLanguageModelFlops(inputs);
        }
        if (!(block instanceof Linear || block instanceof Convolution) || outputs.isEmpty()) {
            return -1;
        }
        long weight = 0;
        long outChannels = 1;
        for (Pair<String, Parameter> p : block.getParameters()) {
            Parameter parameter = p.getValue();
            if (parameter.getType() == Parameter.Type.WEIGHT && parameter.isInitialized()) {
                Shape shape = parameter.getArray().getShape();
                weight = shape.size();
                outChannels = shape.get(0);
            }
        }
        return weight == 0 ? -1 : 2 * outputs.head().getShape().size() * (weight / outChannels);
    }

    /**
     * BERT's masked-language-model head projects the G gathered tokens of width E (E x E) and
     * multiplies them with the token table it is handed as its third input (D x E): 2 G E (E + D).
     * The estimate took the table's D rows for positions and counted 2 E^2 D, 50 times the head's
     * arithmetic at batch 2 and a vocabulary of 17,669 (DJL's TrainBertOnGoemotions), and the share
     * fell from about 98% to 68%.
     */
    private static long maskedLanguageModelFlops(NDList inputs) {
        Shape sequence = inputs.get(0).getShape(); // (B, S, E)
        long gathered = inputs.get(1).getShape().size(); // (B, I)
        long dictionary = inputs.get(2).getShape().get(0); // (D, E)
        long width = sequence.tail();
        return 2 * gathered * width * (width + dictionary);
    }

    /**
     * 2 x matrix-shaped weight elements x positions of the floating input with the most of them. A
     * block whose first inputs are category indices and the rest time series (DJL's DeepAR) is
     * counted by its series. A block of integer inputs only reads token indices: each index is one
     * position (d2l-java's {@code RNNModel}, a text classifier), and the tables it looks them up in
     * (DJL's embeddings) are read, not multiplied, so a lookup alone is 0.
     */
    private static long estimatedFlops(Block block, NDList inputs) {
        long positions = 0;
        long indices = 0;
        for (NDArray input : inputs) {
            DataType type = input.getDataType();
            if (type == DataType.BOOLEAN) {
                continue;
            }
            if (type.isInteger()) {
                indices = Math.max(indices, input.getShape().size());
            } else {
                positions = Math.max(positions, positions(input));
            }
        }
        if (positions == 0) {
            positions = indices;
        }
        if (positions == 0) {
            return 0;
        }
        Set<Parameter> tables = Collections.newSetFromMap(new IdentityHashMap<>());
        addLookupTables(block, tables);
        long weights = 0;
        for (Pair<String, Parameter> p : block.getParameters()) {
            Parameter parameter = p.getValue();
            if (parameter.isInitialized()
                    && parameter.getArray().getShape().dimension() >= 2
                    && !tables.contains(parameter)) {
                weights += parameter.getArray().size();
            }
        }
        return 2 * weights * positions;
    }

    /** The parameters of every embedding in {@code block}'s tree, itself included. */
    private static void addLookupTables(Block block, Set<Parameter> tables) {
        if (block instanceof AbstractEmbedding || block instanceof IdEmbedding) {
            for (Pair<String, Parameter> p : block.getParameters()) {
                tables.add(p.getValue());
            }
            return;
        }
        for (Pair<String, Block> child : block.getChildren()) {
            addLookupTables(child.getValue(), tables);
        }
    }

    /** Pixels of an image batch (N, C, ...), else the rows of (..., features). */
    private static long positions(NDArray input) {
        Shape shape = input.getShape();
        if (shape.dimension() == 0) {
            return 1;
        }
        long features = shape.dimension() >= 4 ? shape.get(1) : shape.tail();
        return features == 0 ? 0 : shape.size() / features;
    }

    /**
     * Returns the share of the counted arithmetic that ran in the 16-bit compute precision.
     *
     * @return 0 to 1; 0 when nothing was counted, or when the policy computes in fp32
     */
    public synchronized double getLowShare() {
        if (!compute.isReduced()) {
            return 0; // the float32 policy: nothing runs in 16 bits
        }
        long all = 0;
        long low = 0;
        for (Unit unit : units.values()) {
            all += unit.flops;
            low += unit.precision == compute ? unit.flops : 0;
        }
        return all == 0 ? 0 : (double) low / all;
    }

    /**
     * Returns the floating-point operations counted in one forward.
     *
     * @return the total, counted and estimated together
     */
    public synchronized long getFlops() {
        long all = 0;
        for (Unit unit : units.values()) {
            all += unit.flops;
        }
        return all;
    }

    /** Whether a unit's count is only an upper bound, so that the total is one too. */
    private boolean hasUpperBound() {
        for (Unit unit : units.values()) {
            if (unit.upperBound) {
                return true;
            }
        }
        return false;
    }

    /**
     * Returns whether less than {@link #WARN_BELOW_LOW_SHARE} of the arithmetic ran in 16 bits.
     *
     * @return true for a model that gains little from its 16-bit policy
     */
    public boolean isMostlyFp32() {
        return compute != Precision.FP32 && getFlops() > 0 && getLowShare() < WARN_BELOW_LOW_SHARE;
    }

    /**
     * Returns the units that ran in fp32, the most arithmetic first.
     *
     * @return the units
     */
    public synchronized List<Unit> getFp32Units() {
        List<Unit> fp32 = new ArrayList<>();
        for (Unit unit : units.values()) {
            if (unit.precision != compute) {
                fp32.add(unit);
            }
        }
        fp32.sort(Comparator.comparingLong((Unit u) -> u.flops).reversed());
        return Collections.unmodifiableList(fp32);
    }

    /**
     * Returns every unit counted, in the order they first ran.
     *
     * @return the units
     */
    public synchronized List<Unit> getUnits() {
        return List.copyOf(units.values());
    }

    /** {@inheritDoc} */
    @Override
    public synchronized String toString() {
        if (!compute.isReduced()) {
            return format(getFlops()) + " a forward, all in " + compute.canonicalName();
        }
        return String.format(
                Locale.ROOT,
                "%.1f%% of %s%s a forward in %s",
                100 * getLowShare(),
                hasUpperBound() ? "at most " : "",
                format(getFlops()),
                compute.canonicalName());
    }

    /** Floating-point operations in the unit that reads best: 1.23 GFLOP, 45.6 kFLOP, 789 FLOP. */
    static String format(long flops) {
        if (flops >= 1_000_000_000L) {
            return String.format(Locale.ROOT, "%.2f GFLOP", flops / 1e9);
        }
        if (flops >= 1_000_000L) {
            return String.format(Locale.ROOT, "%.2f MFLOP", flops / 1e6);
        }
        if (flops >= 1_000L) {
            return String.format(Locale.ROOT, "%.2f kFLOP", flops / 1e3);
        }
        return flops + " FLOP";
    }

    /** One unit's arithmetic in one forward. */
    public static final class Unit {
        private final String path;
        private final String what;
        private final Precision precision;
        private final long flops;
        private final boolean estimated;
        private final boolean upperBound;

        Unit(
                String path,
                String what,
                Precision precision,
                long flops,
                boolean estimated,
                boolean upperBound) {
            this.path = path;
            this.what = what;
            this.precision = precision;
            this.flops = flops;
            this.estimated = estimated;
            this.upperBound = upperBound;
        }

        /**
         * Returns the unit's path, with what it is for a product that is not a layer's.
         *
         * @return e.g. {@code 01TransformerEncoderBlock/01selfAttention (attention products)}
         */
        public String getPath() {
            return path;
        }

        /**
         * Returns the block's simple class name, or what the product is.
         *
         * @return e.g. {@code Linear}
         */
        public String getWhat() {
            return what;
        }

        /**
         * Returns the precision its arithmetic ran in.
         *
         * @return the precision
         */
        public Precision getPrecision() {
            return precision;
        }

        /**
         * Returns its floating-point operations in one forward.
         *
         * @return the count
         */
        public long getFlops() {
            return flops;
        }

        /**
         * Returns whether the count is estimated from parameters (a unit djl-amp runs whole).
         *
         * @return true for an estimate
         */
        public boolean isEstimated() {
            return estimated;
        }

        /**
         * Returns whether the estimate is only an upper bound: the unit holds a convolution, whose
         * weights the estimate counts at every input position.
         *
         * @return true for an upper bound
         */
        public boolean isUpperBound() {
            return upperBound;
        }

        @Override
        public String toString() {
            String qualifier = !estimated ? "" : upperBound ? "at most " : "about ";
            return path + " (" + what + ", " + qualifier + format(flops) + ")";
        }
    }
}
