package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code trainer.getLoss()} of an AMP trainer returns the true loss's value with the scaled
 * gradient, so a custom loop written like EasyTrain's logs the true loss; scaling a loss twice is
 * refused with the fix.
 */
class ScaledLossValueTest {

    private static final float INIT = 65536f;

    @Test
    void theTrainersLossReadsTrueAndScalingItAgainIsRefused() {
        Engine.getInstance().setRandomSeed(4);
        try (Model model = Model.newInstance("scaled-loss", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            LossScaling.dynamicBuilder().initScale(INIT).build()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                ToyTask task = new ToyTask(data);
                Loss plain = Loss.softmaxCrossEntropyLoss();

                try (NDManager step = data.newSubManager();
                        GradientCollector collector = trainer.newGradientCollector()) {
                    NDArray x = task.x.get(task.rows(0));
                    NDArray y = task.y.get(task.rows(0));
                    x.attach(step);
                    y.attach(step);
                    NDList predictions = trainer.forward(new NDList(x));
                    NDArray scaled = trainer.getLoss().evaluate(new NDList(y), predictions);
                    float truth = plain.evaluate(new NDList(y), predictions).getFloat();
                    assertEquals(truth, scaled.getFloat(), 1e-6f, "the value is the true loss");

                    AmpException twice = assertThrows(AmpException.class, () -> amp.scale(scaled));
                    assertTrue(twice.getMessage().contains("already scaled"), twice.getMessage());
                    assertTrue(twice.getMessage().contains("as it is"), twice.getMessage());
                    NDArray own = plain.evaluate(new NDList(y), predictions);
                    assertThrows(AmpException.class, () -> amp.scale(amp.scale(own)));

                    collector.backward(scaled);
                }
                amp.step();
                LossScaler scaler = amp.getScaler();
                assertEquals(0, scaler.getSkippedSteps());

                List<Float> losses = new ArrayList<>();
                for (int i = 1; i < 12; i++) {
                    losses.add(RealProgramsRig.customStep(trainer, amp, task, i));
                }
                assertEquals(0, scaler.getSkippedSteps(), "no step skipped");
                assertEquals(INIT, scaler.getScale(), "the scale stays");
                assertTrue(losses.get(0) < 5f, "a true loss, not a scaled one: " + losses);
                assertTrue(
                        losses.get(losses.size() - 1) < losses.get(0),
                        "the gradients are unscaled once and it trains: " + losses);
            }
        }
    }
}
