package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Checkpointing a d2l-style residual network ({@link D2lResidual}: a stem whose ReLU is {@code
 * Activation::relu}, an fp32 island after a 16-bit BatchNorm) ends bitwise where training without
 * it ends. The fp32 island's cast hands its producer a contiguous gradient where the BatchNorm's
 * output is channels-last: a recomputation that passed the gradient through a leaf got it back in
 * the leaf's layout, and the BatchNorm's backward summed the same values in another order.
 */
class CheckpointingD2lResidualTest {

    static Map<String, Snapshots.Bits> train(String policy, Checkpointing checkpointing, int size) {
        Engine.getInstance().setRandomSeed(7);
        try (Model model = Model.newInstance("d2l-residual", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(D2lResidual.network(4, 3), policy);
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    CheckpointingSetUp.sgd(0.1f),
                                    block,
                                    CheckpointingSetUp.options(policy, checkpointing).build()))) {
                trainer.initialize(new Shape(2, 3, size, size));
                for (int i = 0; i < 2; i++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x =
                            m.arange(2f * 3 * size * size)
                                    .reshape(2, 3, size, size)
                                    .div(40f + i)
                                    .sin();
                    NDArray y = m.create(new float[] {i % 3, (i + 1) % 3});
                    Batch batch = new Batch(m, new NDList(x), new NDList(y), 2, null, null, i, 1);
                    EasyTrain.trainBatch(trainer, batch);
                    trainer.step();
                    batch.close();
                }
                return Snapshots.weights(block);
            }
        }
    }

    /** Tiny images: bf16 and fp16 are emulated on CPUs without native 16-bit arithmetic. */
    @ParameterizedTest
    @CsvSource({"mixed_bfloat16, 6", "mixed_float16, 4", "float32, 6"})
    void everyWeightAndStatisticEndsBitwiseWhereTrainingWithoutCheckpointingEnds(
            String policy, int size) {
        Map<String, Snapshots.Bits> plain = train(policy, Checkpointing.none(), size);
        for (Checkpointing setting :
                new Checkpointing[] {Checkpointing.stages(), Checkpointing.every(2)}) {
            Map<String, Snapshots.Bits> checkpointed = train(policy, setting, size);
            assertEquals(plain.keySet(), checkpointed.keySet());
            for (String name : plain.keySet()) {
                assertEquals(
                        plain.get(name),
                        checkpointed.get(name),
                        policy + " " + setting + ": " + name);
            }
        }
    }
}
