package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A training-mode forward pass outside a {@code GradientCollector} (a training loss logged by hand,
 * a listener that runs the model) between steps or between a backward and its step: the
 * checkpointed run ends bitwise where the same program without checkpointing ends, weights and
 * BatchNorm statistics alike (the extra forward moves the statistics once in both). Also on a
 * thread where PyTorch's grad mode is on outside collectors (DJL turns it off only on the thread
 * that started the engine), where the extra forward records segments the next step's recomputation
 * finds no gradient for.
 */
class CheckpointingForwardOutsideCollectorTest {

    enum Loop {
        /** EasyTrain, the look between one step and the next batch. */
        EASY_TRAIN,
        /** A custom loop, the look between backward and {@code AmpSession.step()}. */
        CUSTOM
    }

    static Map<String, Snapshots.Bits> train(
            String policy, Checkpointing checkpointing, Loop loop) {
        Engine.getInstance().setRandomSeed(11);
        try (Model model = Model.newInstance("forward-outside", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(CheckpointingGradientTest.network(), policy);
            model.setBlock(block);
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(
                                    CheckpointingSetUp.sgd(0.1f),
                                    block,
                                    CheckpointingSetUp.options(policy, checkpointing).build()))) {
                trainer.initialize(new Shape(4, 3, 8, 8));
                for (int i = 0; i < 3; i++) {
                    NDManager m = trainer.getManager().newSubManager();
                    NDArray x = m.arange(4f * 3 * 8 * 8).reshape(4, 3, 8, 8).div(90f + i).sin();
                    NDArray y = m.create(new float[] {i % 5, (i + 1) % 5, (i + 2) % 5, 4});
                    if (loop == Loop.CUSTOM) {
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            collector.backward(
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x))));
                        }
                        look(trainer, x, y);
                        AmpSession.of(trainer).step();
                        m.close();
                    } else {
                        if (i > 0) {
                            look(trainer, x, y);
                        }
                        Batch batch =
                                new Batch(m, new NDList(x), new NDList(y), 4, null, null, i, 1);
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                        batch.close();
                    }
                }
                return Snapshots.weights(block);
            }
        }
    }

    /** The user's own look at the training loss: a training-mode forward, no collector. */
    private static void look(Trainer trainer, NDArray x, NDArray y) {
        NDArray loss = trainer.getLoss().evaluate(new NDList(y), trainer.forward(new NDList(x)));
        loss.getFloat();
    }

    /** Runs {@link #train} on a new thread, where PyTorch's grad mode is on outside collectors. */
    static Map<String, Snapshots.Bits> trainOnNewThread(
            String policy, Checkpointing checkpointing, Loop loop) throws InterruptedException {
        AtomicReference<Map<String, Snapshots.Bits>> result = new AtomicReference<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread thread =
                new Thread(
                        () -> {
                            try {
                                result.set(train(policy, checkpointing, loop));
                            } catch (Throwable e) {
                                failure.set(e);
                            }
                        });
        thread.start();
        thread.join();
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        return result.get();
    }

    @ParameterizedTest
    @CsvSource({
        "float32, EASY_TRAIN, false",
        "mixed_bfloat16, EASY_TRAIN, false",
        "mixed_bfloat16, CUSTOM, false",
        "mixed_bfloat16, EASY_TRAIN, true",
        "mixed_bfloat16, CUSTOM, true"
    })
    void theCheckpointedRunEndsBitwiseWhereTheUncheckpointedOneEnds(
            String policy, Loop loop, boolean newThread) throws InterruptedException {
        Map<String, Snapshots.Bits> plain =
                newThread
                        ? trainOnNewThread(policy, Checkpointing.none(), loop)
                        : train(policy, Checkpointing.none(), loop);
        for (Checkpointing setting :
                new Checkpointing[] {Checkpointing.stages(), Checkpointing.every(2)}) {
            Map<String, Snapshots.Bits> checkpointed =
                    newThread
                            ? trainOnNewThread(policy, setting, loop)
                            : train(policy, setting, loop);
            assertEquals(plain.keySet(), checkpointed.keySet());
            for (String name : plain.keySet()) {
                assertEquals(
                        plain.get(name),
                        checkpointed.get(name),
                        policy + " " + loop + " " + setting + ": " + name);
            }
        }
    }
}
