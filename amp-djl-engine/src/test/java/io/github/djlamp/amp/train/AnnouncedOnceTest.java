package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * DJL's Trainer announces the beginning of training itself, and loops written as DJL's examples
 * (TrainTicTacToe) announce it again: djl-amp's line about the policy, the loss scaling and the
 * step came twice.
 */
class AnnouncedOnceTest {

    @Test
    void theSettingsLineComesOncePerTrainer() {
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try (Model model = Model.newInstance("mlp", "PyTorch")) {
            MixedPrecisionBlock wrapped = Amp.wrap(new Mlp(4, 2, new int[] {8}), "float32");
            model.setBlock(wrapped);
            System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
            try (Trainer trainer =
                    model.newTrainer(
                            Amp.configure(new DefaultTrainingConfig(Loss.l2Loss()), wrapped))) {
                trainer.initialize(new Shape(2, 4));
                trainer.notifyListeners(listener -> listener.onTrainingBegin(trainer));
            }
        } finally {
            System.setErr(err);
        }
        String log = captured.toString(StandardCharsets.UTF_8);
        System.err.print(log);
        assertEquals(1, log.lines().filter(l -> l.contains("djl-amp: policy ")).count(), log);
    }
}
