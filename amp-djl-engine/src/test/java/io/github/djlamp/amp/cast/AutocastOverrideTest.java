package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A composite of the user's own written as d2l-java writes its encoder-decoders: its forward calls
 * a method of its own child ({@code decoder.initState(...)}), so djl-amp cannot read it and runs it
 * in fp32, and its code makes an fp32 array that meets the activations, so a 16-bit unit (the
 * {@code trusted} override) fails at its first forward ("mat1 and mat2 must have the same dtype").
 * The {@code autocast} override runs it whole under the engine's autocast, checked against fp32.
 */
class AutocastOverrideTest {

    private static final Shape SOURCE = new Shape(4, 6, 8);
    private static final Shape TARGET = new Shape(4, 6, 8);
    private static final int STEPS = 6;

    /** The kernel verdicts of the last wrapped run. */
    private static List<KernelVerdict> verdicts = List.of();

    /** d2l-java's shape: an encoder, a decoder whose state the encoder's output initializes. */
    public static final class EncoderDecoder extends AbstractBlock {
        private final Encoder encoder;
        private final Decoder decoder;

        private final boolean lazy;

        EncoderDecoder() {
            this(false);
        }

        /** {@code lazy}: its children make their parameters at their first forward, as d2l's. */
        EncoderDecoder(boolean lazy) {
            this.lazy = lazy;
            encoder = addChildBlock("encoder", new Encoder());
            decoder = addChildBlock("decoder", new Decoder());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> p) {
            NDList encoded = encoder.forward(ps, new NDList(inputs.get(0)), training, p);
            NDList state = decoder.initState(encoded);
            return decoder.forward(ps, new NDList(inputs.get(1)).addAll(state), training, p);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            if (lazy) {
                return;
            }
            encoder.initialize(manager, dataType, inputShapes[0]);
            decoder.initialize(manager, dataType, inputShapes[1], new Shape(4, 1, 16));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return new Shape[] {new Shape(inputShapes[1].get(0), inputShapes[1].get(1), 4)};
        }
    }

    /** A linear layer and relu. */
    public static final class Encoder extends AbstractBlock {
        private final Linear linear =
                addChildBlock("linear", Linear.builder().setUnits(16).build());

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> p) {
            return new NDList(Activation.relu(linear.forward(ps, inputs, training).head()));
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            linear.initialize(manager, dataType, inputShapes);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return linear.getOutputShapes(inputShapes);
        }
    }

    /** Adds the encoder's mean state, weighs by a mask its code makes (fp32), projects out. */
    public static final class Decoder extends AbstractBlock {
        private final Linear hidden =
                addChildBlock("hidden", Linear.builder().setUnits(16).build());
        private final Linear out = addChildBlock("out", Linear.builder().setUnits(4).build());

        NDList initState(NDList encoded) {
            return new NDList(encoded.head().mean(new int[] {1}, true));
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> p) {
            NDArray x = hidden.forward(ps, new NDList(inputs.get(0)), training).head();
            NDArray mask = x.getManager().ones(x.getShape()).mul(0.5f);
            NDArray mixed = Activation.relu(x.add(inputs.get(1))).mul(mask);
            return out.forward(ps, new NDList(mixed), training);
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            hidden.initialize(manager, dataType, inputShapes[0]);
            out.initialize(manager, dataType, new Shape(4, 6, 16));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return new Shape[] {new Shape(inputShapes[0].get(0), inputShapes[0].get(1), 4)};
        }
    }

    @Test
    void theOverridePlansTheBlockUnderTheEnginesAutocast() {
        String override = "[class:" + EncoderDecoder.class.getName() + "=autocast]";
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            ModelPlan plain =
                    ModelPlan.of(
                            PrecisionPolicy.parse("mixed_float16"),
                            new EncoderDecoder(),
                            AmpBackends.forManager(manager)::supportsEngineAutocast);
            assertEquals(BlockPlan.Strategy.STAGE, plain.get("").getStrategy());
            ModelPlan autocast =
                    ModelPlan.of(
                            PrecisionPolicy.parse("mixed_float16" + override),
                            new EncoderDecoder(),
                            AmpBackends.forManager(manager)::supportsEngineAutocast);
            assertEquals(BlockPlan.Strategy.ENGINE_AUTOCAST, autocast.get("").getStrategy());
        }
    }

    @Test
    void trustedFailsWhereAutocastTrainsNearFp32() {
        String name = EncoderDecoder.class.getName();
        float[] fp32 = train(null);
        assertThrows(
                RuntimeException.class, () -> train("mixed_float16[class:" + name + "=trusted]"));
        // bf16: unread code may call softmax on a bf16 array, which ends the JVM in DJL's engine
        AmpException refused =
                assertThrows(
                        AmpException.class,
                        () -> train("mixed_bfloat16[class:" + name + "=autocast]"));
        assertTrue(refused.getMessage().contains("mixed_float16"), refused.getMessage());
        for (String policy : new String[] {"mixed_float16"}) {
            float[] low = train(policy + "[class:" + name + "=autocast]");
            System.out.printf(
                    "%s autocast: loss %.6f -> %.6f, fp32 %.6f -> %.6f%n",
                    policy, low[0], low[STEPS - 1], fp32[0], fp32[STEPS - 1]);
            assertTrue(fp32[STEPS - 1] < fp32[0], "fp32 learns");
            assertEquals(fp32[STEPS - 1], low[STEPS - 1], 0.03 * fp32[STEPS - 1], policy);
            // checked whole against fp32 at its first forward, as the engine's autocast blocks are
            assertTrue(
                    verdicts.stream()
                            .anyMatch(
                                    v ->
                                            v.getOperation()
                                                    .startsWith("engine autocast (EncoderDecoder")),
                    verdicts.toString());
        }
    }

    /**
     * d2l-java's encoder-decoders leave their parameters to their children's first forwards, and
     * its loops call no {@code trainer.initialize}: the check had nothing to check yet and threw
     * DJL's UninitializedParameterException out of the first forward. That forward now runs in fp32
     * and makes them; the check and 16 bits begin with the next.
     */
    @Test
    void parametersMadeByTheFirstForwardAreCheckedFromTheNext() {
        String name = EncoderDecoder.class.getName();
        float[] fp32 = train(null, true);
        float[] low = train("mixed_float16[class:" + name + "=autocast]", true);
        System.out.printf(
                "lazy: fp16 autocast loss %.6f -> %.6f, fp32 %.6f -> %.6f%n",
                low[0], low[STEPS - 1], fp32[0], fp32[STEPS - 1]);
        assertEquals(fp32[0], low[0], 0f, "the first forward ran in fp32");
        assertEquals(fp32[STEPS - 1], low[STEPS - 1], 0.03 * fp32[STEPS - 1]);
        assertTrue(
                verdicts.stream()
                        .anyMatch(
                                v ->
                                        v.getOperation()
                                                .startsWith("engine autocast (EncoderDecoder")),
                verdicts.toString());
    }

    private static float[] train(String policy) {
        return train(policy, false);
    }

    /**
     * Losses of {@link #STEPS} SGD steps on fixed data, plain DJL for a null policy; {@code lazy}:
     * no {@code trainer.initialize}, the parameters made at the first forward.
     */
    private static float[] train(String policy, boolean lazy) {
        Engine.getInstance().setRandomSeed(9);
        EncoderDecoder block = new EncoderDecoder(lazy);
        try (Model model = Model.newInstance("seq2seq", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(block, policy);
            model.setBlock(wrapped == null ? block : wrapped);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            try (Trainer trainer =
                    model.newTrainer(wrapped == null ? config : Amp.configure(config, wrapped))) {
                if (!lazy) {
                    trainer.initialize(SOURCE, TARGET);
                }
                NDList x = new NDList(data.randomNormal(SOURCE), data.randomNormal(TARGET));
                NDList y = new NDList(data.randomNormal(new Shape(4, 6, 4)));
                float[] losses = new float[STEPS];
                AmpSession amp = wrapped == null ? null : AmpSession.of(trainer);
                for (int i = 0; i < STEPS; i++) {
                    try (GradientCollector collector = trainer.newGradientCollector()) {
                        NDArray loss = trainer.getLoss().evaluate(y, trainer.forward(x));
                        collector.backward(loss);
                        losses[i] = loss.getFloat();
                    }
                    if (amp == null) {
                        trainer.step();
                    } else {
                        amp.step();
                    }
                }
                verdicts = wrapped == null ? List.of() : wrapped.getKernelVerdicts();
                return losses;
            }
        }
    }
}
