package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The custom-loop API makes the safe loop the only easy one: {@code amp.step()} checks, steps (or
 * skips and clears) and moves the scale; no public verb hands back a "skip it yourself" flag; and a
 * bf16 loop is plain DJL.
 */
class CustomLoopVerbsTest {

    @Test
    void noPublicVerbAsksTheUserToSkipTheStep() {
        for (Method m : AmpSession.class.getDeclaredMethods()) {
            if (Modifier.isPublic(m.getModifiers()) && m.getReturnType() == boolean.class) {
                assertEquals("isSkipping", m.getName(), "a public boolean verb: " + m);
            }
        }
    }

    @Test
    void aNanGradientIsSkippedAndClearedByStep() {
        Engine.getInstance().setRandomSeed(8);
        try (Model model = Model.newInstance("verbs", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            LossScaling scaling = LossScaling.dynamicBuilder().initScale(1024f).build();
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(RealProgramsRig.sgd(0.1f), block, scaling));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                LossScaler scaler = amp.getScaler();
                ToyTask task = new ToyTask(data);
                Parameter victim = block.getParameters().get(0).getValue();
                for (int i = 0; i < 8; i++) {
                    try (NDManager step = data.newSubManager()) {
                        NDArray x = task.x.get(task.rows(i));
                        NDArray y = task.y.get(task.rows(i));
                        x.attach(step);
                        y.attach(step);
                        try (GradientCollector collector = trainer.newGradientCollector()) {
                            collector.backward(
                                    trainer.getLoss()
                                            .evaluate(
                                                    new NDList(y), trainer.forward(new NDList(x))));
                        }
                        if (i == 2) {
                            NDArray grad = victim.getArray().getGradient();
                            grad.attach(step);
                            grad.set(new NDIndex(0, 0), Float.NaN);
                        }
                        amp.step();
                    }
                }
                assertEquals(8, scaler.getSteps());
                assertEquals(1, scaler.getSkippedSteps(), "only the NaN step skipped");
                assertEquals(512f, scaler.getScale());
            }
        }
    }

    @Test
    void trainerStepWithoutAmpStepIsRefusedUnderScaling() {
        Engine.getInstance().setRandomSeed(9);
        try (Model model = Model.newInstance("verbs-refused", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            LossScaling.dynamic()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(
                            trainer.getLoss()
                                    .evaluate(
                                            new NDList(task.y.get(task.rows(0))),
                                            trainer.forward(new NDList(task.x.get(task.rows(0))))));
                }
                IllegalStateException e = assertThrows(IllegalStateException.class, trainer::step);
                assertTrue(e.getMessage().contains("AmpSession.step()"), e.getMessage());
            }
        }
    }

    @Test
    void aStepWhoseLossWasNeverScaledIsRefused() {
        Engine.getInstance().setRandomSeed(9);
        try (Model model = Model.newInstance("verbs-unscaled", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            LossScaling.dynamic()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                ToyTask task = new ToyTask(data);
                RealProgramsRig.customStep(trainer, amp, task, 0);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(
                            ai.djl.training.loss.Loss.softmaxCrossEntropyLoss()
                                    .evaluate(
                                            new NDList(task.y.get(task.rows(1))),
                                            trainer.forward(new NDList(task.x.get(task.rows(1))))));
                }
                IllegalStateException e = assertThrows(IllegalStateException.class, amp::step);
                assertTrue(e.getMessage().contains("amp.scale(loss)"), e.getMessage());
            }
        }
    }

    @Test
    void verbOrderMistakesNameTheVerbsAUserCalls() {
        Engine.getInstance().setRandomSeed(9);
        try (Model model = Model.newInstance("verbs-order", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "float32");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            RealProgramsRig.sgd(0.1f),
                                            block,
                                            LossScaling.dynamic()));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                AmpSession amp = AmpSession.of(trainer);
                ToyTask task = new ToyTask(data);
                NDList x = new NDList(task.x.get(task.rows(0)));
                NDList y = new NDList(task.y.get(task.rows(0)));
                // PyTorch's habit: unscale, ask, step
                List<float[]> before = RealProgramsRig.values(block);
                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(trainer.getLoss().evaluate(y, trainer.forward(x)));
                }
                amp.unscaleGradients();
                if (!amp.isSkipping()) {
                    amp.step();
                }
                assertNotEquals(
                        0f,
                        RealProgramsRig.largestChange(
                                before.get(0), RealProgramsRig.values(block).get(0)),
                        "the step was applied");

                try (GradientCollector collector = trainer.newGradientCollector()) {
                    collector.backward(trainer.getLoss().evaluate(y, trainer.forward(x)));
                }
                amp.unscaleGradients();
                IllegalStateException twice =
                        assertThrows(IllegalStateException.class, amp::unscaleGradients);
                assertTrue(twice.getMessage().contains("call amp.step() now"), twice.getMessage());
                assertFalse(twice.getMessage().contains("update()"), twice.getMessage());
                IllegalStateException late =
                        assertThrows(
                                IllegalStateException.class,
                                () -> trainer.getLoss().evaluate(y, trainer.forward(x)));
                assertTrue(late.getMessage().contains("amp.step() first"), late.getMessage());
                assertFalse(late.getMessage().contains("unscaleAndCheck"), late.getMessage());
                amp.step();
                assertEquals(2, amp.getScaler().getSteps());
            }
        }
    }

    @Test
    void aBf16CustomLoopIsPlainDjl() {
        Engine.getInstance().setRandomSeed(10);
        try (Model model = Model.newInstance("bf16-loop", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_bfloat16");
            model.setBlock(block);
            try (Trainer trainer =
                            model.newTrainer(Amp.configure(RealProgramsRig.sgd(0.1f), block));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                List<float[]> before = RealProgramsRig.values(block);
                for (int i = 0; i < 3; i++) {
                    try (NDManager step = data.newSubManager();
                            GradientCollector collector = trainer.newGradientCollector()) {
                        NDArray x = task.x.get(task.rows(i));
                        NDArray y = task.y.get(task.rows(i));
                        x.attach(step);
                        y.attach(step);
                        collector.backward(
                                trainer.getLoss()
                                        .evaluate(new NDList(y), trainer.forward(new NDList(x))));
                    }
                    trainer.step(); // as in plain DJL: no scaler calls
                }
                List<float[]> after = RealProgramsRig.values(block);
                assertNotEquals(
                        0f, RealProgramsRig.largestChange(before.get(0), after.get(0)), "trained");
                assertFalse(AmpSession.of(trainer).getScaler().getConfig().isEnabled());
            }
        }
    }
}
