package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.Trainer;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.FusedOptimizer;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingConfig;
import io.github.djlamp.amp.train.LossScalingOptimizer;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code AmpOptions.fusedOptimizer} decides, when the trainer is attached, whether the optimizer
 * steps are fused with the scaler state on the device: AUTO fuses on the CPU and reads the scaler
 * state there every step (the GPU half of AUTO is {@code FusedOptimizerTest}'s), ON fuses and
 * trains to DJL's weights, OFF wins over the system property, which decides only for AUTO.
 */
class FusedOptimizerOptionTest {

    private static final int STEPS = 4;

    private String before;

    @BeforeEach
    void clearProperty() {
        before = System.getProperty(FusedOptimizer.PROPERTY);
        System.clearProperty(FusedOptimizer.PROPERTY);
    }

    @AfterEach
    void restoreProperty() {
        if (before == null) {
            System.clearProperty(FusedOptimizer.PROPERTY);
        } else {
            System.setProperty(FusedOptimizer.PROPERTY, before);
        }
    }

    @Test
    void onFusesAndTrainsToTheWeightsOfDjlsOwnUpdate() {
        Run fused = train(FusedOptimizer.ON);
        Run djl = train(FusedOptimizer.OFF);
        assertTrue(fused.fused && fused.stateOnDevice, "ON: fused, scaler state on the device");
        assertFalse(djl.fused || djl.stateOnDevice, "OFF: DJL's update, state on the host");
        for (int i = 0; i < djl.weights.size(); i++) {
            float[] expected = djl.weights.get(i);
            float[] actual = fused.weights.get(i);
            for (int j = 0; j < expected.length; j++) {
                assertEquals(expected[j], actual[j], 1e-6f, "parameter " + i + "[" + j + "]");
            }
        }
    }

    @Test
    void autoFusesOnTheCpuAndReadsTheScalerEveryStep() {
        // the model and the trainer on the CPU, whatever DJL's default device is (gpu(0) on a GPU
        // machine): this is AUTO's CPU half
        Run auto = train(FusedOptimizer.AUTO, Device.cpu());
        assertTrue(auto.fused, "one launch instead of DJL's update per parameter");
        assertTrue(auto.stateOnDevice);
        assertEquals(
                STEPS,
                auto.hostReads,
                "a host read costs nothing on the CPU: every step's verdict is read");
        Run djl = train(FusedOptimizer.OFF, Device.cpu());
        for (int i = 0; i < djl.weights.size(); i++) {
            float[] expected = djl.weights.get(i);
            float[] actual = auto.weights.get(i);
            for (int j = 0; j < expected.length; j++) {
                assertEquals(expected[j], actual[j], 1e-6f, "parameter " + i + "[" + j + "]");
            }
        }
    }

    @Test
    void thePropertyDecidesForAutoAndOffWinsOverIt() {
        System.setProperty(FusedOptimizer.PROPERTY, "on");
        Run auto = train(FusedOptimizer.AUTO);
        assertTrue(auto.fused && auto.stateOnDevice, "-Ddjlamp.fusedOptimizer=on turns AUTO on");
        assertTrue(auto.hostReads < STEPS, "ON keeps the read interval: " + auto.hostReads);
        Run off = train(FusedOptimizer.OFF);
        assertFalse(off.fused || off.stateOnDevice, "an explicit OFF wins over the property");
    }

    private static Run train(FusedOptimizer setting) {
        return train(setting, null);
    }

    /** Trains a model made on {@code device}, or on DJL's default device when it is null. */
    private static Run train(FusedOptimizer setting, Device device) {
        Engine.getInstance().setRandomSeed(5);
        try (Model model =
                device == null
                        ? Model.newInstance("fused-option", "PyTorch")
                        : Model.newInstance("fused-option", device, "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(new RealProgramsRig.Mlp().block, "mixed_float16");
            model.setBlock(block);
            AmpTrainingConfig config =
                    Amp.configure(
                            device == null
                                    ? RealProgramsRig.sgd(0.1f)
                                    : RealProgramsRig.sgd(0.1f).optDevices(new Device[] {device}),
                            block,
                            AmpOptions.builder().fusedOptimizer(setting).build());
            try (Trainer trainer = model.newTrainer(config);
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(ToyTask.BATCH, ToyTask.FEATURES));
                ToyTask task = new ToyTask(data);
                for (int i = 0; i < STEPS; i++) {
                    task.trainStep(trainer, i);
                }
                Run run = new Run();
                run.fused = ((LossScalingOptimizer) config.getOptimizer()).isFused();
                run.stateOnDevice = AmpSession.of(trainer).getScaler().isStateOnDevice();
                run.hostReads = AmpSession.of(trainer).getScaler().getHostReads();
                run.weights = RealProgramsRig.values(block);
                return run;
            }
        }
    }

    private static final class Run {
        boolean fused;
        boolean stateOnDevice;
        long hostReads;
        List<float[]> weights;
    }
}
