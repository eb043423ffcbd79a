package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.BaseNDManager;
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
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The first step's kernel checks keep nothing: after each of the first steps the engine holds as
 * many live native arrays, and as many open managers, as a run without checks (issue: what the
 * first step makes must not stay for the rest of training). The memory they freed is given back to
 * the system after the step (FreedMemoryTest; the process peak is in bench/RESULTS.md).
 */
class FirstStepKeepsNothingTest {

    private static final int STEPS = 3;
    private static final int BATCH = 4;

    @Test
    void liveArraysAndManagersAfterEachOfTheFirstStepsAreThoseOfARunWithoutChecks()
            throws Exception {
        // the run without checks first: what the checked run left behind would count in a run
        // after it, in the same process
        List<List<Integer>> unchecked = liveAfterSteps(KernelVerification.OFF);
        List<List<Integer>> checked = liveAfterSteps(KernelVerification.ON);
        System.out.println(
                "live native arrays and open managers after steps 1.."
                        + STEPS
                        + ": checked "
                        + checked
                        + ", unchecked "
                        + unchecked);
        assertEquals(unchecked.get(0), checked.get(0), "live native arrays after each step");
        assertEquals(unchecked.get(1), checked.get(1), "open managers after each step");
    }

    /** Counts the managers open under {@code manager}, itself included (DJL lists arrays only). */
    private static int openManagers(NDManager manager) throws ReflectiveOperationException {
        Field resources = BaseNDManager.class.getDeclaredField("resources");
        resources.setAccessible(true);
        int count = 1;
        for (Object resource : ((Map<?, ?>) resources.get(manager)).values()) {
            if (resource instanceof NDManager) {
                count += openManagers((NDManager) resource);
            }
        }
        return count;
    }

    private static List<List<Integer>> liveAfterSteps(KernelVerification verification)
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
                List<Integer> arrays = new ArrayList<>();
                List<Integer> managers = new ArrayList<>();
                Iterator<Batch> batches = trainer.iterateDataset(dataset).iterator();
                for (int step = 1; step <= STEPS; step++) {
                    Batch batch = batches.next();
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                    arrays.add(root.getManagedArrays().size());
                    managers.add(openManagers(root));
                }
                return List.of(arrays, managers);
            }
        }
    }
}
