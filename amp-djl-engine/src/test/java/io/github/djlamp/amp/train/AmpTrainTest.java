package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.EvaluatorTrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.TranslateException;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.spi.StepGraphs;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link AmpTrain#fit} against DJL's {@code EasyTrain.fit} on the same data, listeners and
 * evaluators: 2 epochs of 11 batches, the last one partial. Where the step is captured (stand-in
 * graphs that run each replay again, since this machine has none), the weights, the running
 * statistics and every evaluation the listeners kept must be EasyTrain's, bitwise; where the engine
 * refuses (the CPU), AmpTrain is EasyTrain.
 */
class AmpTrainTest {

    private static final int SAMPLES = 42;
    private static final int BATCH = 4;
    private static final int EPOCHS = 2;

    /**
     * With {@code nanBatch}, one batch of the first epoch holds a NaN image: its step is skipped,
     * and its non-finite loss stays out of the training evaluations, as under EasyTrain.
     */
    @ParameterizedTest
    @CsvSource({
        "mixed_float16, true, false",
        "mixed_bfloat16, true, false",
        "mixed_float16, false, false",
        "mixed_float16, true, true"
    })
    void fitsAsEasyTrainFits(String policy, boolean standIn, boolean nanBatch) throws Exception {
        Outcome easy = train(policy, false, null, nanBatch);
        StandInStepGraphs.Rerun graphs = standIn ? new StandInStepGraphs.Rerun() : null;
        Outcome captured = train(policy, true, graphs, nanBatch);
        if (standIn) {
            // per epoch: 3 warm-up steps (first epoch), 1 capture, the partial batch eagerly
            assertEquals(1, graphs.captures);
            assertEquals(EPOCHS * 10 - 3 - 1, graphs.replays);
        } else {
            System.out.println(
                    "AmpTrainTest: the engine's graphs on this machine refuse ("
                            + Engine.getInstance().defaultDevice()
                            + "): AmpTrain.fit runs EasyTrain's batches");
        }
        assertEquals(easy.evaluations.keySet(), captured.evaluations.keySet());
        for (String name : easy.evaluations.keySet()) {
            assertEquals(
                    easy.evaluations.get(name),
                    captured.evaluations.get(name),
                    0f,
                    policy + ": evaluation " + name);
        }
        assertTrue(easy.evaluations.containsKey("train_Accuracy"), "" + easy.evaluations);
        if (nanBatch) {
            // the validation set holds the NaN image too: only the training keys leave it out
            for (Map.Entry<String, Float> evaluation : easy.evaluations.entrySet()) {
                if (evaluation.getKey().startsWith("train_")) {
                    assertTrue(Float.isFinite(evaluation.getValue()), "" + easy.evaluations);
                }
            }
        }
        // a stand-in's replay runs the step's Java code again, which counts the step a second time
        long doubled = standIn ? graphs.replays : 0;
        assertEquals(easy.steps + doubled, captured.steps, "the scaler's step count");
        for (int i = 0; i < easy.parameters.size(); i++) {
            assertArrayEquals(
                    easy.parameters.get(i), captured.parameters.get(i), 0f, "parameter " + i);
        }
    }

    private record Outcome(Map<String, Float> evaluations, List<float[]> parameters, long steps) {}

    private static Outcome train(
            String policy, boolean ampTrain, StepGraphs graphs, boolean nanBatch)
            throws IOException, TranslateException {
        Engine.getInstance().setRandomSeed(5);
        try (NDManager data = NDManager.newBaseManager();
                Model model = Model.newInstance("amp-train", "PyTorch")) {
            NDArray images =
                    data.arange(SAMPLES * 3f * 8 * 8).reshape(SAMPLES, 3, 8, 8).div(91f).sin();
            NDArray labels = data.arange(SAMPLES).mod(5);
            if (nanBatch) {
                images.set(new NDIndex(21), Float.NaN); // the sixth batch
            }
            ArrayDataset dataset =
                    new ArrayDataset.Builder()
                            .setData(images)
                            .optLabels(labels)
                            .setSampling(BATCH, false)
                            .build();
            MixedPrecisionBlock block = Amp.wrap(CapturedStepTest.network(false), policy);
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .optMomentum(0.9f)
                                            .build())
                            .addEvaluator(new Accuracy())
                            .addTrainingListeners(new EvaluatorTrainingListener());
            AmpOptions options =
                    AmpOptions.builder()
                            .fusedOptimizer(FusedOptimizer.ON)
                            .hostSyncInterval(3)
                            .build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(BATCH, 3, 8, 8));
                if (ampTrain) {
                    AmpTrain.fit(trainer, EPOCHS, dataset, dataset, graphs);
                } else {
                    EasyTrain.fit(trainer, EPOCHS, dataset, dataset);
                }
                TrainingResult result = trainer.getTrainingResult();
                List<float[]> parameters = new ArrayList<>();
                for (Pair<String, Parameter> p : block.getParameters()) {
                    parameters.add(p.getValue().getArray().toFloatArray());
                }
                return new Outcome(
                        result.getEvaluations(),
                        parameters,
                        AmpSession.of(trainer).getScaler().getSteps());
            }
        }
    }
}
