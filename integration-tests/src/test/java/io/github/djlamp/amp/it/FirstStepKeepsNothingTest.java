package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The first step's kernel checks keep nothing: after each of the first steps the engine holds as
 * many live native arrays as a run without checks (issue: what the first step makes must not stay
 * for the rest of training). The memory they freed is given back to the system after the step
 * (FreedMemoryTest; the process peak is in bench/RESULTS.md).
 */
class FirstStepKeepsNothingTest {

    private static final int STEPS = 3;
    private static final int BATCH = 4;

    @Test
    void liveArraysAfterEachOfTheFirstStepsAreThoseOfARunWithoutChecks() throws Exception {
        List<Integer> checked = liveArraysAfterSteps(KernelVerification.ON);
        List<Integer> unchecked = liveArraysAfterSteps(KernelVerification.OFF);
        System.out.println(
                "live native arrays after steps 1.."
                        + STEPS
                        + ": checked "
                        + checked
                        + ", unchecked "
                        + unchecked);
        assertEquals(unchecked, checked);
    }

    private static List<Integer> liveArraysAfterSteps(KernelVerification verification)
            throws Exception {
        Engine.getInstance().setRandomSeed(17);
        try (Model m = Model.newInstance("first-step-" + verification, "PyTorch")) {
            m.setBlock(Amp.wrap(Models.smallCnn(), "mixed_bfloat16", verification));
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.adam()
                                            .optLearningRateTracker(Tracker.fixed(0.001f))
                                            .build());
            try (Trainer trainer = m.newTrainer(Amp.configure(base, m.getBlock()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(BATCH, 1, 28, 28));
                NDArray x = data.randomNormal(new Shape(BATCH * STEPS, 1, 28, 28));
                NDArray y =
                        data.randomInteger(0, 4, new Shape(BATCH * STEPS), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(x)
                                .optLabels(y)
                                .setSampling(BATCH, false)
                                .build();
                NDManager root = trainer.getManager();
                while (root.getParentManager() != null) {
                    root = root.getParentManager();
                }
                List<Integer> counts = new ArrayList<>();
                Iterator<Batch> batches = trainer.iterateDataset(dataset).iterator();
                for (int step = 1; step <= STEPS; step++) {
                    Batch batch = batches.next();
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    counts.add(root.getManagedArrays().size());
                }
                return counts;
            }
        }
    }
}
