package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model saved in the middle of fp16 training with {@code model.save} and loaded into a fresh
 * {@code Model} resumes with the loss scaler exactly where it was: same scale, growth tracker,
 * hysteresis count, step and skip counters, and from there the same scale trajectory as the run
 * that never stopped.
 */
class ResumeTest {

    private static final String POLICY = "mixed_float16";
    private static final int CONTINUED_STEPS = 20;
    private static final int MAX_STEPS_BEFORE_SAVE = 200;

    /**
     * 2^24 overflows at once; growth every 5 clean steps pushes the scale back into overflow; a
     * hysteresis of 2 gives the state a count of overflows since the last change to carry over.
     */
    private static final LossScaling SCALING =
            LossScaling.dynamicBuilder()
                    .initScale(16777216f)
                    .growthInterval(5)
                    .hysteresis(2)
                    .build();

    @TempDir Path dir;

    @Test
    void scalerStateSurvivesSaveAndLoad() throws Exception {
        Engine.getInstance().setRandomSeed(23);
        ScalerState saved;
        Map<String, Snapshots.Bits> savedWeights;
        int savedAtStep;
        List<ScalerState> continued = new ArrayList<>();
        Map<String, Snapshots.Bits> continuedWeights;
        try (NDManager data = NDManager.newBaseManager("PyTorch")) {
            ToyTask task = new ToyTask(data);
            try (Model model = Model.newInstance("resume", "PyTorch")) {
                model.setBlock(Amp.wrap(Models.mlp(32, ToyTask.CLASSES), POLICY));
                try (Trainer trainer = model.newTrainer(config(model))) {
                    trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                    AmpSession amp = AmpSession.of(trainer);
                    int step = 0;
                    boolean grew = false;
                    float previous = amp.getScaler().getScale();
                    // train until the scaler has backed off and grown, and is in the middle of both
                    // a growth interval and a hysteresis count
                    while (step < MAX_STEPS_BEFORE_SAVE) {
                        task.trainStep(trainer, step++);
                        float scale = amp.getScaler().getScale();
                        grew |= scale > previous;
                        previous = scale;
                        ScalerState s = amp.getScaler().state();
                        if (grew
                                && s.getSkippedSteps() > 0
                                && s.getGrowthTracker() > 0
                                && s.getOverflowsSinceChange() > 0) {
                            break;
                        }
                    }
                    saved = amp.getScaler().state();
                    savedAtStep = step;
                    assertTrue(
                            saved.getSkippedSteps() > 0, "an overflow before the save: " + saved);
                    assertTrue(grew, "a growth before the save: " + saved);
                    assertTrue(saved.getGrowthTracker() > 0, "mid-interval at the save: " + saved);
                    assertTrue(
                            saved.getOverflowsSinceChange() > 0,
                            "mid-hysteresis at the save: " + saved);
                    savedWeights = Snapshots.weights(model.getBlock());
                    model.save(dir, "resume");
                    // also with fused steps (the GPU default), whose state lives on the device
                    String property = model.getProperty(AmpSession.SCALER_STATE_PROPERTY);
                    assertTrue(
                            property.startsWith(saved + ";mode=DYNAMIC;"),
                            "the state saved with the model is current, stamped with its"
                                    + " configuration: "
                                    + property);

                    for (int i = 0; i < CONTINUED_STEPS; i++) {
                        task.trainStep(trainer, step++);
                        continued.add(amp.getScaler().state());
                    }
                    continuedWeights = Snapshots.weights(model.getBlock());
                }
            }
            System.out.println("saved after step " + savedAtStep + ": " + saved);

            try (Model model = Model.newInstance("resume", "PyTorch")) {
                model.setBlock(Amp.wrap(Models.mlp(32, ToyTask.CLASSES), POLICY));
                model.load(dir, "resume");
                assertEquals(
                        savedWeights,
                        Snapshots.weights(model.getBlock()),
                        "weights loaded bit for bit");
                try (Trainer trainer = model.newTrainer(config(model))) {
                    AmpSession amp = AmpSession.of(trainer);
                    assertEquals(saved, amp.getScaler().state(), "scaler state resumed");
                    assertEquals(saved.getScale(), amp.getScaler().getScale());
                    assertEquals(saved.getGrowthTracker(), amp.getScaler().getGrowthTracker());
                    assertEquals(saved.getSteps(), amp.getScaler().getSteps());
                    assertEquals(saved.getSkippedSteps(), amp.getScaler().getSkippedSteps());

                    List<ScalerState> resumed = new ArrayList<>();
                    int step = savedAtStep;
                    for (int i = 0; i < CONTINUED_STEPS; i++) {
                        task.trainStep(trainer, step++);
                        resumed.add(amp.getScaler().state());
                    }
                    System.out.println("continued: " + continued.get(CONTINUED_STEPS - 1));
                    System.out.println("resumed:   " + resumed.get(CONTINUED_STEPS - 1));
                    assertEquals(continued, resumed, "the resumed run moves the scale identically");
                    assertEquals(
                            continuedWeights,
                            Snapshots.weights(model.getBlock()),
                            "and trains to the same weights");
                }
            }
        }
    }

    /** Plain SGD: no optimizer state that {@code model.save} would lose. */
    private static TrainingConfig config(Model model) {
        TrainingConfig base =
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                        .optOptimizer(
                                Optimizer.sgd()
                                        .setLearningRateTracker(Tracker.fixed(0.05f))
                                        .build());
        return Amp.configure(base, model.getBlock(), SCALING);
    }
}
