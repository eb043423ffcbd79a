package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.translate.NoopTranslator;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.train.AmpSession;
import org.junit.jupiter.api.Test;

/**
 * What users do to a wrapped model after wrapping it: replace its head, set its data type, run it
 * through a Predictor.
 */
class WrappedModelChangesTest {

    private static final Shape INPUT = new Shape(2, 8);

    private static SequentialBlock mlp() {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(3).build());
    }

    @Test
    void aReplacedHeadIsWhatTheWrappedForwardRuns() {
        SequentialBlock original = mlp();
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block wrapped = Amp.wrap(original, "mixed_bfloat16");
            wrapped.initialize(manager, DataType.FLOAT32, INPUT);
            ParameterStore store = new ParameterStore(manager, false);
            NDList x = new NDList(manager.randomNormal(INPUT));
            assertEquals(new Shape(2, 3), wrapped.forward(store, x, false).head().getShape());

            original.removeLastBlock();
            original.add(Linear.builder().setUnits(5).build());
            original.getChildren()
                    .get(2)
                    .getValue()
                    .initialize(manager, DataType.FLOAT32, new Shape(2, 16));
            NDList y = wrapped.forward(store, x, false);
            assertEquals(new Shape(2, 5), y.head().getShape(), "the new head ran");
            assertEquals(DataType.FLOAT32, y.head().getDataType());
        }
    }

    @Test
    void aHeadReplacedBeforeTheFirstForwardIsWhatTheWrappedForwardRuns() {
        SequentialBlock original = mlp();
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Block wrapped = Amp.wrap(original, "mixed_bfloat16");
            wrapped.initialize(manager, DataType.FLOAT32, INPUT);
            original.removeLastBlock();
            original.add(Linear.builder().setUnits(5).build()).add(Activation.reluBlock());
            for (int i = 2; i < 4; i++) {
                original.getChildren()
                        .get(i)
                        .getValue()
                        .initialize(manager, DataType.FLOAT32, new Shape(2, 16));
            }
            ParameterStore store = new ParameterStore(manager, false);
            NDList y = wrapped.forward(store, new NDList(manager.randomNormal(INPUT)), false);
            assertEquals(new Shape(2, 5), y.head().getShape(), "the new head ran");
            assertEquals(DataType.FLOAT32, y.head().getDataType());
        }
    }

    @Test
    void aHeadReplacedMidTrainingUnderFp16HasItsGradientsUnscaledAndChecked() {
        Engine.getInstance().setRandomSeed(15);
        RealProgramsRig.Mlp mlp = new RealProgramsRig.Mlp();
        try (Model model = Model.newInstance("new-head", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(mlp.block, "mixed_float16");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(Amp.configure(RealProgramsRig.sgd(0.1f), block));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                task.trainStep(trainer, 0);
                task.trainStep(trainer, 1);

                mlp.block.removeLastBlock();
                Linear head = Linear.builder().setUnits(ToyTask.CLASSES).build();
                mlp.block.add(head);
                head.initialize(model.getNDManager(), DataType.FLOAT32, new Shape(1, 8));
                float[] before = head.getParameters().get("weight").getArray().toFloatArray();
                task.trainStep(trainer, 2);
                float change =
                        RealProgramsRig.largestChange(
                                before,
                                head.getParameters().get("weight").getArray().toFloatArray());
                assertTrue(change > 0, "the new head trains");
                // lr 0.1 times a true gradient of order 1; left scaled by 2^16 it would be ~1e3
                assertTrue(change < 1f, "the new head's step is unscaled: " + change);
                assertEquals(0, AmpSession.of(trainer).getScaler().getSkippedSteps());
            }
        }
    }

    @Test
    void float16MasterWeightsAreRefusedNamingTheFix() {
        try (Model model = Model.newInstance("fp16-masters", "PyTorch")) {
            model.setBlock(Amp.wrap(mlp(), "mixed_float16"));
            model.setDataType(DataType.FLOAT16);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss()),
                                    model.getBlock()))) {
                AmpException e = assertThrows(AmpException.class, () -> trainer.initialize(INPUT));
                assertTrue(e.getMessage().contains("model.setDataType"), e.getMessage());
            }
        }
    }

    @Test
    void float16MastersInitializedBeforeWrappingAreRefusedAtTheFirstForward() {
        SequentialBlock original = mlp();
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            original.initialize(manager, DataType.FLOAT16, INPUT);
            Block wrapped = Amp.wrap(original, "mixed_bfloat16");
            NDList x = new NDList(manager.randomNormal(INPUT));
            AmpException e =
                    assertThrows(
                            AmpException.class,
                            () -> wrapped.forward(new ParameterStore(manager, false), x, false));
            assertTrue(e.getMessage().contains("fp32 master weights"), e.getMessage());
        }
    }

    @Test
    void aPredictorWithANoopTranslatorLeavesNoMoreArraysPerCallThanPlainDjl() throws Exception {
        int plain = arraysLeftPerCall(mlp());
        int wrapped = arraysLeftPerCall(Amp.wrap(mlp(), "mixed_bfloat16"));
        assertTrue(
                wrapped <= plain,
                "arrays left on the caller's manager per call: wrapped "
                        + wrapped
                        + ", plain DJL "
                        + plain);
    }

    private static int arraysLeftPerCall(Block block) throws Exception {
        int calls = 10;
        try (Model model = Model.newInstance("predictor", "PyTorch")) {
            model.setBlock(block);
            block.initialize(model.getNDManager(), DataType.FLOAT32, INPUT);
            try (Predictor<NDList, NDList> predictor = model.newPredictor(new NoopTranslator());
                    NDManager caller = model.getNDManager().newSubManager()) {
                NDList x = new NDList(caller.randomNormal(INPUT));
                predictor.predict(x); // warm-up
                int before = caller.getManagedArrays().size();
                for (int i = 0; i < calls; i++) {
                    predictor.predict(x);
                }
                return (caller.getManagedArrays().size() - before) / calls;
            }
        }
    }
}
