package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The reference the fused Nag is checked against ({@link DjlNagRule}) against MXNet's {@code
 * nag_mom_update} transcribed on its own ({@link MxnetNagMomUpdate}): the same weights and
 * velocities over many steps, with and without weight decay, rescaling, clipping and a schedule.
 */
class DjlNagRuleTest {

    private static final int STEPS = 24;
    private static final float MOMENTUM = 0.9f;

    private NDManager manager;

    @BeforeEach
    void setUp() {
        manager = NDManager.newBaseManager("PyTorch");
    }

    @AfterEach
    void tearDown() {
        manager.close();
    }

    /**
     * Issue 30's example, one bias element from DJL's zero initialization, rate 0.05, momentum 0.9,
     * gradients 0.19885 then 0.31003: MXNet's kernel moves it by -0.01889 and then by -0.03751 (the
     * velocity carries {@code -0.9^2 0.05 0.19885} of the first gradient into the second update),
     * so the bias is -0.05640 after the second update. The rule does the same.
     */
    @Test
    void theIssuesHandExampleIsMxnetsKernel() {
        float[] weight = {0f};
        float[] mom = {0f};
        float[] grads = {0.19885f, 0.31003f};
        float[] after = new float[grads.length];
        for (int step = 0; step < grads.length; step++) {
            MxnetNagMomUpdate.update(
                    weight, new float[] {grads[step]}, mom, 0.05f, MOMENTUM, 0f, 1f, -1f);
            after[step] = weight[0];
        }
        assertEquals(-0.01889f, after[0], 5e-6f, "the bias after the first update");
        assertEquals(-0.03751f, after[1] - after[0], 5e-6f, "the second update");
        assertEquals(-0.05640f, after[1], 5e-6f, "the bias after the second update");

        DjlNagRule rule = new DjlNagRule(Optimizer.nag(), Tracker.fixed(0.05f), MOMENTUM);
        NDArray bias = manager.zeros(new Shape(1));
        for (int step = 0; step < grads.length; step++) {
            rule.update("bias", bias, manager.create(new float[] {grads[step]}));
            assertEquals(after[step], bias.getFloat(0), 1e-7f, "the rule, step " + (step + 1));
        }
    }

    @Test
    void theRuleIsMxnetsKernelOverManySteps() {
        assertRuleIsMxnets(Optimizer.nag(), Tracker.fixed(0.05f), 0f, 1f, -1f, 0);
    }

    /** Weight decay, rescaling, two-sided clipping, a rate that changes every step, an offset. */
    @Test
    void theRuleIsMxnetsKernelWithEverySetting() {
        Tracker schedule = n -> 0.05f * (1f + (n % 5)) / (1f + n * 0.1f);
        assertRuleIsMxnets(
                Optimizer.nag()
                        .optWeightDecays(0.01f)
                        .setRescaleGrad(0.5f)
                        .optClipGrad(0.3f)
                        .optBeginNumUpdate(3),
                schedule,
                0.01f,
                0.5f,
                0.3f,
                3);
    }

    private void assertRuleIsMxnets(
            Nag.Builder builder,
            Tracker rate,
            float wd,
            float rescale,
            float clip,
            int beginNumUpdate) {
        Random random = new Random(7);
        int size = 5;
        float[] weight = new float[size];
        for (int i = 0; i < size; i++) {
            weight[i] = (float) random.nextGaussian();
        }
        float[] mom = new float[size];
        DjlNagRule rule = new DjlNagRule(builder, rate, MOMENTUM);
        NDArray ruleWeight = manager.create(weight.clone());
        for (int step = 0; step < STEPS; step++) {
            float[] grad = new float[size];
            for (int i = 0; i < size; i++) {
                grad[i] = (float) random.nextGaussian();
            }
            float lr = rate.getNewValue(beginNumUpdate + step + 1);
            MxnetNagMomUpdate.update(weight, grad, mom, lr, MOMENTUM, wd, rescale, clip);
            rule.update("w", ruleWeight, manager.create(grad));
            float[] actual = ruleWeight.toFloatArray();
            float[] velocity = rule.velocity("w").toFloatArray();
            for (int i = 0; i < size; i++) {
                assertEquals(
                        weight[i],
                        actual[i],
                        2e-6f * Math.max(1f, Math.abs(weight[i])),
                        "weight, step " + (step + 1) + ", element " + i);
                assertEquals(
                        mom[i],
                        velocity[i],
                        2e-6f * Math.max(1f, Math.abs(mom[i])),
                        "velocity, step " + (step + 1) + ", element " + i);
            }
        }
    }
}
