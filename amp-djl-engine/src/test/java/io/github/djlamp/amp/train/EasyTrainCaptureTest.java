package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.Batch;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.listener.EvaluatorTrainingListener;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.listener.TrainingListener.BatchData;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.TranslateException;
import ai.djl.util.Pair;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * DJL's {@code EasyTrain.fit}, unchanged, captures its own step where it can: the user's two lines
 * and nothing else. 2 epochs of 11 batches, the last one partial. With stand-in graphs that run
 * each replay again (this machine has none), the weights, the running statistics and every
 * evaluation the listeners kept must be those of the same fit uncaptured (the engine refuses here),
 * bitwise; a loop of the user's that calls {@code EasyTrain.trainBatch} itself is never captured.
 */
class EasyTrainCaptureTest {

    private static final int SAMPLES = 42;
    private static final int BATCH = 4;
    private static final int EPOCHS = 2;

    private enum Loop {
        FIT,
        OWN_LOOP
    }

    /**
     * With {@code nanBatch}, one batch of the first epoch holds a NaN image: its step is skipped,
     * and its non-finite loss stays out of the training evaluations, as uncaptured.
     */
    @ParameterizedTest
    @CsvSource({"mixed_float16, false", "mixed_bfloat16, false", "mixed_float16, true"})
    void fitCapturesItsStepAndEndsWhereItEndsUncaptured(String policy, boolean nanBatch)
            throws Exception {
        Outcome plain = uncaptured(policy, Loop.FIT, nanBatch);
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Outcome captured = train(policy, Loop.FIT, graphs, nanBatch);
        // per epoch: 3 warm-up steps (first epoch), 1 capture, the partial batch eagerly
        assertEquals(1, graphs.captures);
        assertEquals(EPOCHS * 10 - 3 - 1, graphs.replays);
        // the thread's stream is given back at each epoch's end and taken again at the next batch
        assertEquals(EPOCHS, graphs.enters, "enters");
        assertEquals(EPOCHS, graphs.exits, "exits");
        assertSameTraining(policy, plain, captured, graphs.replays);
        assertTrue(plain.evaluations.containsKey("train_Accuracy"), "" + plain.evaluations);
        if (nanBatch) {
            for (Map.Entry<String, Float> evaluation : plain.evaluations.entrySet()) {
                if (evaluation.getKey().startsWith("train_")) {
                    assertTrue(Float.isFinite(evaluation.getValue()), "" + plain.evaluations);
                }
            }
        }
    }

    /**
     * DJL's {@code EncoderDecoder} appends its encoder's states to the labels in its training
     * forward (DJL's TrainSeq2Seq): a captured step must hand its forward a list of its own each
     * step, not the static one, which would grow by a state a step and no longer fit the batch.
     */
    @Test
    void aForwardThatAppendsToTheLabelsTrainsCapturedAsUncaptured() throws Exception {
        Outcome plain =
                withCaptureOff(() -> train("mixed_bfloat16", Loop.FIT, null, false, NONE, true));
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Outcome captured = train("mixed_bfloat16", Loop.FIT, graphs, false, NONE, true);
        assertEquals(1, graphs.captures);
        assertSameTraining("labels appended to", plain, captured, graphs.replays);
    }

    /**
     * A loop of the user's may step when it likes (after several batches, say): a batch there runs
     * as DJL runs it, graphs or not.
     */
    @Test
    void aLoopOfTheUsersIsNotCaptured() throws Exception {
        Outcome plain = uncaptured("mixed_float16", Loop.OWN_LOOP, false);
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Outcome withGraphs = train("mixed_float16", Loop.OWN_LOOP, graphs, false);
        assertEquals(0, graphs.captures);
        assertEquals(0, graphs.enters);
        assertSameTraining("own loop", plain, withGraphs, 0);
    }

    /**
     * A listener of the user's that acts in {@code onTrainingBatch} (here it reads a gradient, as a
     * gradient-norm logger would) would see a captured step's end: the step is not captured, and
     * says which listener; one that acts only at the epoch's end does not stop it.
     */
    @Test
    void aListenerThatActsOnEachBatchKeepsTheStepUncaptured() throws Exception {
        List<Float> norms = new ArrayList<>();
        TrainingListener gradientNorms =
                new TrainingListenerAdapter() {
                    @Override
                    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
                        Parameter first =
                                trainer.getModel().getBlock().getParameters().get(0).getValue();
                        norms.add(first.getArray().getGradient().norm().getFloat());
                    }
                };
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Outcome refused = train("mixed_bfloat16", Loop.FIT, graphs, false, gradientNorms, false);
        assertEquals(0, graphs.captures);
        assertTrue(refused.refusal.contains("acts in onTrainingBatch"), refused.refusal);
        assertTrue(refused.refusal.contains(gradientNorms.getClass().getName()), refused.refusal);
        assertTrue(norms.stream().allMatch(n -> n > 0), "gradients read before the step: " + norms);
        TrainingListener atEpochs =
                new TrainingListenerAdapter() {
                    @Override
                    public void onEpoch(Trainer trainer) {
                        norms.clear();
                    }
                };
        StandInStepGraphs.Rerun epochGraphs = new StandInStepGraphs.Rerun();
        train("mixed_bfloat16", Loop.FIT, epochGraphs, false, atEpochs, false);
        assertEquals(1, epochGraphs.captures);
    }

    /** {@code -Ddjlamp.capture=off} is the one switch: EasyTrain.fit then runs as in DJL. */
    @Test
    void theSwitchTurnsItOff() throws Exception {
        StandInStepGraphs.Rerun graphs = new StandInStepGraphs.Rerun();
        Outcome off = withCaptureOff(() -> train("mixed_bfloat16", Loop.FIT, graphs, false));
        assertEquals(0, graphs.captures);
        assertEquals(0, graphs.enters);
        assertTrue(off.replays == 0, "replays with capture off: " + off.replays);
    }

    /**
     * The engine's own graphs: on a CUDA device libtorch's graphs capture and replay EasyTrain's
     * step, which must end bitwise where the uncaptured fit ends (the same kernels in the same
     * order); where the engine has none (the CPU), the fit is the uncaptured one.
     */
    @ParameterizedTest
    @CsvSource({"mixed_float16", "mixed_bfloat16"})
    void theEnginesGraphsEndWhereTheUncapturedFitEnds(String policy) throws Exception {
        Outcome plain = uncaptured(policy, Loop.FIT, false);
        Outcome engine = train(policy, Loop.FIT, null, false);
        if (engine.refusal != null) {
            System.out.println(
                    "EasyTrainCaptureTest: the engine's graphs refuse on "
                            + Engine.getInstance().defaultDevice()
                            + " ("
                            + engine.refusal
                            + "): EasyTrain.fit ran uncaptured");
            assertEquals(0, engine.replays);
        } else {
            assertEquals(EPOCHS * 10 - 3 - 1, engine.replays, "replays of libtorch's graph");
        }
        assertSameTraining(policy + " (engine graphs)", plain, engine, 0);
    }

    private static Outcome uncaptured(String policy, Loop loop, boolean nanBatch) throws Exception {
        return withCaptureOff(() -> train(policy, loop, null, nanBatch));
    }

    private static Outcome withCaptureOff(Callable<Outcome> run) throws Exception {
        String before = System.getProperty(CapturedStep.PROPERTY);
        System.setProperty(CapturedStep.PROPERTY, "off");
        try {
            return run.call();
        } finally {
            if (before == null) {
                System.clearProperty(CapturedStep.PROPERTY);
            } else {
                System.setProperty(CapturedStep.PROPERTY, before);
            }
        }
    }

    private static void assertSameTraining(
            String what, Outcome expected, Outcome actual, long replays) {
        assertEquals(expected.evaluations.keySet(), actual.evaluations.keySet());
        for (String name : expected.evaluations.keySet()) {
            assertEquals(
                    expected.evaluations.get(name),
                    actual.evaluations.get(name),
                    0f,
                    what + ": evaluation " + name);
        }
        // a stand-in's replay runs the step's Java code again, which counts the step a second time
        assertEquals(expected.steps + replays, actual.steps, what + ": the scaler's step count");
        for (int i = 0; i < expected.parameters.size(); i++) {
            assertArrayEquals(
                    expected.parameters.get(i),
                    actual.parameters.get(i),
                    0f,
                    what + ": parameter " + i);
        }
    }

    private record Outcome(
            Map<String, Float> evaluations,
            List<float[]> parameters,
            long steps,
            long replays,
            String refusal) {}

    private static Outcome train(
            String policy, Loop loop, StandInStepGraphs graphs, boolean nanBatch)
            throws IOException, TranslateException {
        return train(policy, loop, graphs, nanBatch, NONE, false);
    }

    private static Outcome train(
            String policy,
            Loop loop,
            StandInStepGraphs graphs,
            boolean nanBatch,
            TrainingListener extra,
            boolean appendsToLabels)
            throws IOException, TranslateException {
        Engine.getInstance().setRandomSeed(5);
        try (NDManager data = NDManager.newBaseManager();
                Model model = Model.newInstance("easy-train-capture", "PyTorch")) {
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
            Block network =
                    appendsToLabels
                            ? new AppendsToLabels(CapturedStepTest.network(false))
                            : CapturedStepTest.network(false);
            MixedPrecisionBlock block = Amp.wrap(network, policy);
            model.setBlock(block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(new FirstLabelLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .optMomentum(0.9f)
                                            .build())
                            .addEvaluator(new Accuracy())
                            .addTrainingListeners(new EvaluatorTrainingListener(), extra);
            AmpOptions options =
                    AmpOptions.builder()
                            .fusedOptimizer(FusedOptimizer.ON)
                            .hostSyncInterval(3)
                            .build();
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block, options))) {
                trainer.initialize(new Shape(BATCH, 3, 8, 8));
                AmpSession.of(trainer).setStepGraphs(graphs);
                if (loop == Loop.FIT) {
                    EasyTrain.fit(trainer, EPOCHS, dataset, dataset);
                } else {
                    for (int epoch = 0; epoch < EPOCHS; epoch++) {
                        for (Batch batch : trainer.iterateDataset(dataset)) {
                            EasyTrain.trainBatch(trainer, batch);
                            trainer.step();
                            batch.close();
                        }
                        EasyTrain.evaluateDataset(trainer, dataset);
                        trainer.notifyListeners(listener -> listener.onEpoch(trainer));
                    }
                }
                TrainingResult result = trainer.getTrainingResult();
                List<float[]> parameters = new ArrayList<>();
                for (Pair<String, Parameter> p : block.getParameters()) {
                    parameters.add(p.getValue().getArray().toFloatArray());
                }
                AmpSession session = AmpSession.of(trainer);
                CapturedStep step = session.easyTrainStep();
                return new Outcome(
                        result.getEvaluations(),
                        parameters,
                        session.getScaler().getSteps(),
                        step == null ? 0 : step.getReplays(),
                        session.easyTrainRefusal());
            }
        }
    }

    private static final TrainingListener NONE = new TrainingListenerAdapter() {};

    /** DJL's softmax cross-entropy on the first label: the others are what a forward appended. */
    private static final class FirstLabelLoss extends Loss {
        private final Loss inner = Loss.softmaxCrossEntropyLoss();

        FirstLabelLoss() {
            super("SoftmaxCrossEntropyLoss");
        }

        @Override
        public NDArray evaluate(NDList labels, NDList predictions) {
            return inner.evaluate(new NDList(labels.head()), predictions);
        }
    }

    /**
     * A block whose training forward appends to its labels what DJL's {@code EncoderDecoder}
     * appends there (its encoder's states): here the row sums of its output.
     */
    private static final class AppendsToLabels extends AbstractBlock {
        private final Block inner;

        AppendsToLabels(Block inner) {
            this.inner = addChildBlock("inner", inner);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            return inner.forward(store, inputs, training, params);
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store, NDList data, NDList labels, PairList<String, Object> params) {
            NDList out = inner.forward(store, data, true, params);
            labels.add(out.head().sum(new int[] {1}));
            return out;
        }

        @Override
        protected void initializeChildBlocks(
                NDManager manager, DataType dataType, Shape... inputShapes) {
            inner.initialize(manager, dataType, inputShapes);
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return inner.getOutputShapes(inputShapes);
        }
    }
}
