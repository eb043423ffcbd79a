package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A block used in several places of a model (DJL's TabNet shares its first feature layers between
 * its steps; language models tie embeddings) lists its parameters once per place. They are one
 * parameter: djl-amp updates each once and unscales its gradient once, as DJL's ParameterStore
 * does. Before, the fused step updated a shared parameter once per place (with a moment buffer
 * each) and the unscale divided its gradient by the loss scale once per place.
 */
class SharedParametersTest {

    private static final int BATCH = 8;
    private static final int BATCHES = 4;

    /** One Linear in two places, then a head. */
    private static Block model() {
        Linear shared = Linear.builder().setUnits(4).build();
        return new SequentialBlock()
                .add(shared)
                .add(Activation.reluBlock())
                .add(shared)
                .add(Linear.builder().setUnits(2).build());
    }

    @Test
    void aSharedLayerIsUpdatedOnceInFp32() throws Exception {
        Supplier<Optimizer> sgd =
                () ->
                        Optimizer.sgd()
                                .setLearningRateTracker(Tracker.fixed(0.1f))
                                .optMomentum(0.9f)
                                .build();
        Supplier<Optimizer> adam =
                () -> Optimizer.adam().optLearningRateTracker(Tracker.fixed(0.01f)).build();
        for (Supplier<Optimizer> optimizer : java.util.List.of(sgd, adam)) {
            Map<String, float[]> plain = train(null, optimizer.get());
            Map<String, float[]> wrapped = train("float32", optimizer.get());
            assertClose(plain, wrapped, 1e-5, optimizer.get().getClass().getSimpleName());
        }
    }

    @Test
    void aSharedLayersGradientIsUnscaledOnceInFp16() throws Exception {
        Supplier<Optimizer> sgd =
                () -> Optimizer.sgd().setLearningRateTracker(Tracker.fixed(0.1f)).build();
        Map<String, float[]> plain = train(null, sgd.get());
        Map<String, float[]> fp16 = train("mixed_float16", sgd.get());
        assertClose(plain, fp16, 1e-2, "fp16 with dynamic loss scaling");
    }

    /** The weights after {@value #BATCHES} EasyTrain steps on a fixed regression task. */
    private static Map<String, float[]> train(String policy, Optimizer optimizer) throws Exception {
        try (Model model = Model.newInstance("shared", "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(7);
            Block block = model();
            model.setBlock(policy == null ? block : Amp.wrap(block, policy));
            // an L1 loss: DJL's L2 loss multiplies by a Java number, whose buffer DJL's engine
            // can free before backward reads it (README, "DJL defects djl-amp cannot fix")
            TrainingConfig config =
                    new DefaultTrainingConfig(Loss.l1Loss()).optOptimizer(optimizer);
            try (Trainer trainer =
                    model.newTrainer(
                            policy == null ? config : Amp.configure(config, model.getBlock()))) {
                trainer.initialize(new Shape(BATCH, 4));
                Engine.getInstance().setRandomSeed(11);
                NDArray x = data.randomNormal(new Shape(BATCH * BATCHES, 4));
                NDArray y = data.randomNormal(new Shape(BATCH * BATCHES, 2));
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(BATCH, false)
                                .build();
                EasyTrain.fit(trainer, 1, dataset, null);
            }
            Map<String, float[]> weights = new LinkedHashMap<>();
            for (Pair<String, Parameter> p : block.getParameters()) {
                weights.put(p.getKey(), p.getValue().getArray().toFloatArray());
            }
            return weights;
        }
    }

    private static void assertClose(
            Map<String, float[]> expected,
            Map<String, float[]> actual,
            double tolerance,
            String what) {
        assertEquals(expected.keySet(), actual.keySet(), what);
        for (Map.Entry<String, float[]> e : expected.entrySet()) {
            float[] a = actual.get(e.getKey());
            for (int i = 0; i < a.length; i++) {
                assertEquals(
                        e.getValue()[i],
                        a[i],
                        tolerance * Math.max(1, Math.abs(e.getValue()[i])),
                        what + ": " + e.getKey() + "[" + i + "]");
            }
        }
    }
}
