package io.github.djlamp.amp.doctor;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Block;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingConfig;
import ai.djl.training.dataset.Batch;
import ai.djl.training.evaluator.Accuracy;
import ai.djl.training.util.ProgressBar;
import ai.djl.translate.TranslateException;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.util.Iterator;
import java.util.Locale;

/**
 * One training run of the doctor: {@code EasyTrain.fit}'s loop (train each batch, step, close it;
 * {@code onEpoch} after each epoch), with a clock and a memory probe around each step, then one
 * pass over the test set.
 */
final class DoctorRun {

    private static final String ACCURACY_KEY = "doctor-test";

    private final AmpDoctor doctor;
    private final PrecisionPolicy policy;
    private final Checkpointing checkpointing;
    private final String title;

    DoctorRun(AmpDoctor doctor, PrecisionPolicy policy, Checkpointing checkpointing, String title) {
        this.doctor = doctor;
        this.policy = policy;
        this.checkpointing = checkpointing;
        this.title = title;
    }

    /** Whether a policy runs through plain DJL: fp32 everywhere, nothing to cast. */
    static boolean isPlain(PrecisionPolicy policy) {
        return policy.equals(PrecisionPolicy.float32());
    }

    RunResult run() throws IOException, TranslateException {
        boolean plain = isPlain(policy);
        Engine engine =
                doctor.getEngineName() == null
                        ? Engine.getInstance()
                        : Engine.getEngine(doctor.getEngineName());
        engine.setRandomSeed(doctor.getSeed());
        Block block = doctor.newBlock();
        TrainingConfig userConfig = doctor.newTrainingConfig();
        StepLossRecorder recorder = new StepLossRecorder(userConfig.getLossFunction());
        TrainingConfig recording = new RecordingTrainingConfig(userConfig, recorder);

        RunResult.Builder result = RunResult.builder();
        result.policyName = policy.getName();
        result.checkpointing = checkpointing.isEnabled() ? checkpointing.toString() : null;
        result.mixedPrecision = !plain;
        result.epochs = doctor.getEpochs();
        try (Model model = Model.newInstance(doctor.getModelName(), engine.getEngineName())) {
            TrainingConfig config;
            if (plain) {
                model.setBlock(block);
                config = recording;
            } else {
                model.setBlock(Amp.wrap(block, policy));
                config =
                        Amp.configure(
                                recording,
                                model.getBlock(),
                                AmpOptions.builder()
                                        .lossScaling(doctor.getLossScaling())
                                        .checkpointing(checkpointing)
                                        .build());
            }
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(doctor.getInputShape());
                result.device = trainer.getDevices()[0];
                AmpSession session = plain ? null : AmpSession.of(trainer);
                LossScaler scaler = session == null ? null : session.getScaler();
                result.precision =
                        plain ? Precision.FP32 : session.getPolicy().getComputePrecision();
                result.lossScaling =
                        describe(scaler == null ? LossScaling.none() : scaler.getConfig());
                if (doctor.isProgress()) {
                    System.out.println(
                            title
                                    + ": "
                                    + result.precision.shortName()
                                    + (plain
                                            ? " through plain DJL"
                                            : " through djl-amp, policy "
                                                    + session.getPolicy()
                                                    + (checkpointing.isEnabled()
                                                            ? ", checkpointing=" + checkpointing
                                                            : ""))
                                    + ", loss scaling "
                                    + result.lossScaling);
                }
                MemoryProbe probe =
                        doctor.newMemoryProbe(trainer.getDevices()[0], engine.getEngineName());
                probe.release();
                long start = System.nanoTime();
                train(trainer, recorder, scaler, probe, result);
                result.trainSeconds = (System.nanoTime() - start) / 1e9;
                result.peakMemoryBytes = probe.getPeakBytes();
                result.memoryMethod = probe.describe();
                if (doctor.getTestSet() != null) {
                    long evalStart = System.nanoTime();
                    result.testAccuracy = evaluate(trainer, result.precision);
                    result.evalSeconds = (System.nanoTime() - evalStart) / 1e9;
                }
                result.stepMemoryBytes = measureStepMemory(trainer, probe);
                if (!plain) {
                    result.kernelVerdicts.addAll(
                            ((MixedPrecisionBlock) model.getBlock()).getKernelVerdicts());
                }
            }
        }
        return result.build();
    }

    private void train(
            Trainer trainer,
            StepLossRecorder recorder,
            LossScaler scaler,
            MemoryProbe probe,
            RunResult.Builder result)
            throws IOException, TranslateException {
        int warmup = doctor.getWarmupSteps();
        long measuredImages = 0;
        long measuredNanos = 0;
        long unmeasuredImages = 0;
        long unmeasuredNanos = 0;
        int step = 0;
        for (int epoch = 1; epoch <= doctor.getEpochs(); epoch++) {
            ProgressBar bar = null;
            long stepStart = System.nanoTime();
            probe.stepStarted();
            Iterator<Batch> batches = trainer.iterateDataset(doctor.getTrainSet()).iterator();
            while (batches.hasNext()) {
                Batch batch = batches.next();
                if (bar == null && doctor.isProgress()) {
                    bar =
                            new ProgressBar(
                                    result.precision.shortName()
                                            + " "
                                            + epoch
                                            + "/"
                                            + doctor.getEpochs(),
                                    batch.getProgressTotal());
                }
                int images = batch.getSize();
                long progress = batch.getProgress();
                long skippedBefore = scaler == null ? 0 : scaler.getSkippedSteps();
                EasyTrain.trainBatch(trainer, batch);
                trainer.step();
                batch.close();
                long now = System.nanoTime();
                probe.stepEnded();

                long nanos = now - stepStart;
                result.stepMillis.add(nanos / 1e6);
                result.losses.add(recorder.takeLastLoss());
                result.lossScales.add(scaler == null ? 1f : scaler.getScale());
                if (scaler != null && scaler.getSkippedSteps() > skippedBefore) {
                    result.skippedSteps.add(step);
                }
                result.imagesTrained += images;
                if (step >= warmup) {
                    measuredImages += images;
                    measuredNanos += nanos;
                } else {
                    unmeasuredImages += images;
                    unmeasuredNanos += nanos;
                }
                step++;
                if (bar != null) {
                    long shownImages = measuredNanos > 0 ? measuredImages : unmeasuredImages;
                    long shownNanos = measuredNanos > 0 ? measuredNanos : unmeasuredNanos;
                    bar.update(
                            progress,
                            String.format(
                                    Locale.ROOT,
                                    "%.0f img/s%s, loss %.4f",
                                    shownImages / (shownNanos / 1e9),
                                    measuredNanos > 0 ? "" : " (warm-up)",
                                    result.losses.get(result.losses.size() - 1)));
                }
                stepStart = System.nanoTime();
                probe.stepStarted();
            }
            trainer.notifyListeners(listener -> listener.onEpoch(trainer));
        }
        if (measuredNanos > 0) {
            result.warmupSteps = warmup;
            result.imagesPerSecond = measuredImages / (measuredNanos / 1e9);
        } else {
            // the run was too short to leave a warm-up out: measure every step
            result.warmupSteps = 0;
            result.imagesPerSecond =
                    unmeasuredNanos > 0 ? unmeasuredImages / (unmeasuredNanos / 1e9) : 0;
        }
    }

    /**
     * Runs up to {@link AmpDoctor#MEMORY_STEPS} more training steps, each from released memory, and
     * returns the most one of them added at its peak. They come after the evaluation, so they
     * change nothing that is reported.
     */
    private long measureStepMemory(Trainer trainer, MemoryProbe probe)
            throws IOException, TranslateException {
        long most = -1;
        int steps = 0;
        Iterator<Batch> batches = trainer.iterateDataset(doctor.getTrainSet()).iterator();
        while (steps < AmpDoctor.MEMORY_STEPS && batches.hasNext()) {
            probe.release();
            probe.stepStarted();
            Batch batch = batches.next();
            try {
                EasyTrain.trainBatch(trainer, batch);
                trainer.step();
            } finally {
                batch.close();
            }
            probe.stepEnded();
            most = Math.max(most, probe.getLastStepGrowthBytes());
            steps++;
        }
        return most;
    }

    private double evaluate(Trainer trainer, Precision precision)
            throws IOException, TranslateException {
        Accuracy accuracy = new Accuracy();
        accuracy.addAccumulator(ACCURACY_KEY);
        ProgressBar bar = null;
        for (Batch batch : trainer.iterateDataset(doctor.getTestSet())) {
            try {
                if (bar == null && doctor.isProgress()) {
                    bar =
                            new ProgressBar(
                                    precision.shortName() + " test", batch.getProgressTotal());
                }
                NDList predictions = trainer.evaluate(batch.getData());
                accuracy.updateAccumulator(ACCURACY_KEY, batch.getLabels(), predictions);
                if (bar != null) {
                    bar.update(batch.getProgress());
                }
            } finally {
                batch.close();
            }
        }
        return accuracy.getAccumulator(ACCURACY_KEY);
    }

    /** A short description of a loss scaling configuration, for tables. */
    static String describe(LossScaling scaling) {
        return switch (scaling.getMode()) {
            case NONE -> "none";
            case STATIC -> "static " + formatScale(scaling.getInitScale());
            case DYNAMIC ->
                    String.format(
                            Locale.ROOT,
                            "dynamic (from %s, x%s every %d clean steps, x%s on overflow)",
                            formatScale(scaling.getInitScale()),
                            trim(scaling.getGrowthFactor()),
                            scaling.getGrowthInterval(),
                            trim(scaling.getBackoffFactor()));
        };
    }

    /** Writes a scale as an integer when it is one, else with its decimals. */
    static String formatScale(float scale) {
        if (scale == Math.rint(scale) && Math.abs(scale) < 1e15) {
            return String.format(Locale.ROOT, "%d", (long) scale);
        }
        return Float.toString(scale);
    }

    private static String trim(double value) {
        return value == Math.rint(value)
                ? String.format(Locale.ROOT, "%d", (long) value)
                : Double.toString(value);
    }
}
