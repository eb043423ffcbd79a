package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.timeseries.distribution.DistributionLoss;
import ai.djl.timeseries.distribution.output.NegativeBinomialOutput;
import ai.djl.timeseries.model.deepar.DeepARNetwork;
import ai.djl.timeseries.model.deepar.DeepARTrainingNetwork;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's DeepAR training network (TrainTimeSeries: M5's shape, tiny) is a composite with a forward
 * of its own; it used to run whole in fp32 (0% of its arithmetic in 16 bits, vouching refused in
 * bf16 because it reaches ArgProj). Its forward reads no 16-bit array's type into JNI, so it runs
 * whole under libtorch's autocast: its LSTM and projections in 16 bits where the engine can run
 * them so. On a CPU without AVX512-BF16, oneDNN cannot create the LSTM primitive in bf16 or fp16:
 * then the stage runs it in fp32 and says the engine's reason, and the losses are fp32's.
 */
class DeepArUnderEngineAutocastTest {

    private static final int STEPS = 4;
    private static final int BATCH = 4;
    private static final int PREDICTION = 4;
    private static final int CONTEXT = 4;
    private static final int PAST = CONTEXT + 3; // the largest lag is 3
    private static final int TIME_FEATURES = 2;

    @Test
    void deepArRunsUnderTheEnginesAutocastOrSaysWhyItStaysFp32() {
        CompositeRun fp32 = train(null);
        for (String policy : List.of("mixed_bfloat16", "mixed_float16")) {
            CompositeRun low = train(policy);
            assertNotNull(low.stage(), policy + ": DeepAR runs as one engine-autocast stage");
            String fallback = low.stage().fallbackReason();
            low.print("DeepAR", policy, fp32);
            if (fallback == null || fallback.startsWith("its check against fp32")) {
                CompositeRun.assertDecidedRight(
                        policy, fp32, low, () -> train(null), () -> train(policy));
            } else {
                float last = low.losses().get(STEPS - 1);
                float reference = fp32.losses().get(STEPS - 1);
                assertEquals(reference, last, 1e-4f * Math.abs(reference), policy);
            }
        }
    }

    /**
     * The 16-bit path itself, on any CPU: with libtorch's oneDNN off its own LSTM kernels run in
     * bf16 and fp16, so DeepAR's forward and backward run with 16-bit arrays in DJL's Java code
     * (ArgProj's projections, the domain map, the boundary casts), and its loss trains as fp32's.
     */
    @Test
    void withLibtorchsOwnLstmKernelsDeepArComputesIn16Bits() {
        boolean before = OneDnnSwitch.setEnabled(false);
        try {
            CompositeRun fp32 = train(null);
            for (String policy : List.of("mixed_bfloat16", "mixed_float16")) {
                CompositeRun low = train(policy);
                assertNotNull(low.stage(), policy);
                low.print("DeepAR without oneDNN", policy, fp32);
                CompositeRun.assertDecidedRight(
                        policy, fp32, low, () -> train(null), () -> train(policy));
            }
        } finally {
            OneDnnSwitch.setEnabled(before);
        }
    }

    private static DeepARTrainingNetwork network() {
        return DeepARNetwork.builder()
                .setFreq("W")
                .setPredictionLength(PREDICTION)
                .optContextLength(CONTEXT)
                .setCardinality(List.of(3, 2))
                .optDistrOutput(new NegativeBinomialOutput())
                .optLagsSeq(List.of(1, 2, 3))
                .optHiddenSize(8)
                .optNumLayers(2)
                .optDropRate(0f)
                .buildTrainingNetwork();
    }

    private static DefaultTrainingConfig config() {
        return new DefaultTrainingConfig(new DistributionLoss("Loss", new NegativeBinomialOutput()))
                .optOptimizer(
                        Optimizer.adam().optLearningRateTracker(Tracker.fixed(1e-2f)).build());
    }

    /** DeepAR's nine inputs: M5-like counts, two categorical features, one static real. */
    private static NDList inputs(NDManager m) {
        NDArray pastTarget = m.randomInteger(0, 6, new Shape(BATCH, PAST), DataType.INT32);
        NDArray futureTarget = m.randomInteger(0, 6, new Shape(BATCH, PREDICTION), DataType.INT32);
        return new NDList(
                m.create(new int[] {0, 1, 2, 1, 0, 1, 2, 0}, new Shape(BATCH, 2)),
                m.zeros(new Shape(BATCH, 1)),
                m.randomNormal(new Shape(BATCH, PAST, TIME_FEATURES)),
                pastTarget.toType(DataType.FLOAT32, false),
                m.ones(new Shape(BATCH, PAST)),
                m.zeros(new Shape(BATCH, PAST)),
                m.randomNormal(new Shape(BATCH, PREDICTION, TIME_FEATURES)),
                futureTarget.toType(DataType.FLOAT32, false),
                m.ones(new Shape(BATCH, PREDICTION)));
    }

    private static Shape[] shapes(NDList inputs) {
        Shape[] shapes = new Shape[inputs.size()];
        for (int i = 0; i < shapes.length; i++) {
            shapes[i] = inputs.get(i).getShape();
        }
        return shapes;
    }

    /** The label DeepAR's loss reads: the last context-1 past targets, then the future ones. */
    private static NDArray label(NDList inputs) {
        return inputs.get(3).get(":, {}:", -CONTEXT + 1).concat(inputs.get(7), 1);
    }

    private static CompositeRun train(String policy) {
        Engine.getInstance().setRandomSeed(11);
        DeepARTrainingNetwork block = network();
        MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(block, policy);
        try (Model model = Model.newInstance("deepar", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            model.setBlock(wrapped == null ? block : wrapped);
            DefaultTrainingConfig config = config();
            try (Trainer trainer =
                    model.newTrainer(wrapped == null ? config : Amp.configure(config, wrapped))) {
                Engine.getInstance().setRandomSeed(11);
                NDList x = inputs(data);
                NDArray y = label(x);
                trainer.initialize(shapes(x));
                return CompositeRun.train(trainer, wrapped, data, x, y, BATCH, STEPS);
            }
        }
    }
}
