package io.github.djlamp.bench.train;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.nn.Parameter;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.util.Pair;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Where djl-amp's bookkeeping time goes: the step of the fp32-compute, dynamic-scaling variant
 * taken apart with the verb API ({@code scale} inside the loss, {@code unscaleGradients}, then
 * {@code step}: the decorated optimizer step and the scale update), each part timed, next to plain
 * DJL fp32 steps.
 */
@Command(
        name = "bookkeeping",
        description = "Times each part of djl-amp's per-step bookkeeping (fp32 compute).")
final class BookkeepingCommand implements Callable<Integer> {

    @Option(
            names = "--network",
            defaultValue = "resnet18",
            description = "resnet18, resnet50, resnet50-224, transformer or transformer-256")
    String network;

    @Option(names = "--batch", defaultValue = "64", description = "Batch size.")
    int batch;

    @Option(names = "--warmup", defaultValue = "5", description = "Untimed steps per variant.")
    int warmup;

    @Option(names = "--steps", defaultValue = "40", description = "Timed steps per variant.")
    int steps;

    @Override
    public Integer call() {
        Network net = Network.of(network);
        try (TrainingRig fp32 = TrainingRig.create(net, Variant.FP32, batch);
                TrainingRig amp = TrainingRig.create(net, Variant.AMP_FP32_BOOKKEEPING, batch)) {
            Map<String, List<Double>> parts = new LinkedHashMap<>();
            for (int i = 0; i < warmup + steps; i++) {
                Map<String, Double> step = timedStep(fp32, false);
                step.putAll(timedStep(amp, true));
                if (i >= warmup) {
                    step.forEach((k, v) -> parts.computeIfAbsent(k, x -> new ArrayList<>()).add(v));
                }
            }
            System.out.println("medians over " + steps + " alternating steps:");
            for (Map.Entry<String, List<Double>> e : parts.entrySet()) {
                System.out.printf("%-60s %8.3f ms%n", e.getKey(), median(e.getValue()));
            }
        }
        return 0;
    }

    private static double median(List<Double> values) {
        return Samples.of(values).median();
    }

    /** One step, through the verb API for the AMP variant, each part timed (ms). */
    private static Map<String, Double> timedStep(TrainingRig rig, boolean amp) {
        Trainer trainer = rig.getTrainer();
        AmpSession session = amp ? AmpSession.of(trainer) : null;
        String name = amp ? "AMP " : "fp32 ";
        Batch batch = rig.randomBatch();
        Map<String, Double> t = new LinkedHashMap<>();
        long start = System.nanoTime();
        try (GradientCollector collector = trainer.newGradientCollector()) {
            NDList predictions = trainer.forward(batch.getData(), batch.getLabels());
            long forwardEnd = System.nanoTime();
            NDArray loss = trainer.getLoss().evaluate(batch.getLabels(), predictions);
            long lossEnd = System.nanoTime();
            collector.backward(loss);
            long backwardEnd = System.nanoTime();
            t.put(
                    name + "forward" + (amp ? " (wrapper, buffer snapshot)" : ""),
                    (forwardEnd - start) / 1e6);
            t.put(name + "loss" + (amp ? " (scaled)" : ""), (lossEnd - forwardEnd) / 1e6);
            t.put(name + "backward", (backwardEnd - lossEnd) / 1e6);
        }
        long handles = 0;
        long check = System.nanoTime();
        if (amp) {
            int count = gradientHandles(rig, batch);
            handles = System.nanoTime() - check;
            t.put(
                    "AMP   " + count + " gradient handles, as unscaleGradients makes them",
                    handles / 1e6);
            check = System.nanoTime();
            session.unscaleGradients();
        }
        long stepStart = System.nanoTime();
        if (amp) {
            session.step(); // trainer.step(), then the scale update
        } else {
            trainer.step();
        }
        long close = System.nanoTime();
        batch.close();
        long end = System.nanoTime();
        if (amp) {
            t.put(
                    "AMP unscaleGradients (handles, fused kernel, one read)",
                    (stepStart - check) / 1e6);
        }
        t.put(
                name
                        + (amp
                                ? "AmpSession.step (LossScalingOptimizer around SGD, scale kernel,"
                                        + " state into the model)"
                                : "trainer.step (SGD)"),
                (close - stepStart) / 1e6);
        t.put(name + "batch.close", (end - close) / 1e6);
        t.put(name + "whole step (without the separate handles)", (end - start - handles) / 1e6);
        return t;
    }

    /**
     * Makes one gradient handle per trainable parameter on the batch's manager, the way {@code
     * AmpSession.unscaleGradients} collects them, to time that part on its own.
     */
    private static int gradientHandles(TrainingRig rig, Batch batch) {
        MixedPrecisionBlock block = (MixedPrecisionBlock) rig.getTrainer().getModel().getBlock();
        ParameterStore store = block.getTrainingLink().getTrainingStore();
        int count = 0;
        for (Pair<String, Parameter> pair : block.getParameters()) {
            Parameter parameter = pair.getValue();
            if (parameter.requiresGradient() && parameter.isInitialized()) {
                NDArray grad =
                        store.getValue(parameter, rig.getTrainer().getDevices()[0], true)
                                .getGradient();
                grad.attach(batch.getManager());
                count++;
            }
        }
        return count;
    }
}
