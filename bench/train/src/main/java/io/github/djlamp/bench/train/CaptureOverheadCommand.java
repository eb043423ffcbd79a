package io.github.djlamp.bench.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;
import io.github.djlamp.amp.train.AmpSession;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The host's share of a replayed step (issue 42): a captured step run on graphs that replay
 * nothing, so that what a step costs is only djl-amp's Java between replays (the batch copied into
 * the static arrays, the scaler's step counted on the host, the check that the graph's arrays are
 * still the session's), beside an eager step of the same variant. Measurable without a GPU; the
 * device's replay comes on top.
 */
@Command(
        name = "capture-overhead",
        description = "Times the host's part of a replayed step (graphs that replay nothing).")
final class CaptureOverheadCommand implements Callable<Integer> {

    @Option(
            names = "--network",
            defaultValue = "resnet50",
            description = "resnet18, resnet50, resnet50-224, transformer or transformer-256")
    String network;

    @Option(names = "--batch", defaultValue = "1", description = "Batch size.")
    int batch;

    @Option(
            names = "--variant",
            defaultValue = "djl-amp-bf16-fused",
            description = "A fused djl-amp variant: djl-amp-bf16-fused or djl-amp-fp16-fused.")
    String variant;

    @Option(names = "--steps", defaultValue = "200", description = "Timed replayed steps.")
    int steps;

    @Option(names = "--eager-steps", defaultValue = "10", description = "Timed eager steps.")
    int eagerSteps;

    @Override
    public Integer call() {
        Network net = Network.of(network);
        try (TrainingRig rig = TrainingRig.create(net, Variant.of(variant), batch)) {
            Trainer trainer = rig.getTrainer();
            double[] eager = new double[eagerSteps];
            rig.step(); // the first step: kernel checks
            for (int i = 0; i < eagerSteps; i++) {
                eager[i] = rig.step() / 1e6;
            }
            double[] replayed = new double[steps];
            try (CapturedStep step =
                    AmpSession.of(trainer)
                            .captureStep(
                                    body(trainer),
                                    CapturedStep.DEFAULT_WARM_UP_STEPS,
                                    new ReplayingNothing())) {
                for (int i = 0; i < CapturedStep.DEFAULT_WARM_UP_STEPS + 1; i++) {
                    try (Batch b = rig.randomBatch()) {
                        step.run(b.getData(), b.getLabels());
                    }
                }
                if (step.getState() != CapturedStep.State.REPLAYING) {
                    System.out.println("not captured: " + step.getRefusal());
                    return 1;
                }
                for (int i = 0; i < steps; i++) {
                    try (Batch b = rig.randomBatch()) {
                        long start = System.nanoTime();
                        step.run(b.getData(), b.getLabels());
                        replayed[i] = (System.nanoTime() - start) / 1e6;
                    }
                }
            }
            Samples e = new Samples(eager);
            Samples r = new Samples(replayed);
            System.out.printf(
                    "%s %s batch %d on %s: eager step median %.3f ms; replayed step (host part,"
                            + " graphs replaying nothing) median %.4f ms (IQR %.4f-%.4f) over %d"
                            + " steps, %.2f%% of the eager step%n",
                    net.key(),
                    variant,
                    batch,
                    rig.getDevice(),
                    e.median(),
                    r.median(),
                    r.quantile(0.25),
                    r.quantile(0.75),
                    steps,
                    100 * r.median() / e.median());
            return 0;
        }
    }

    private static StepBody body(Trainer trainer) {
        return (data, labels) -> {
            try (GradientCollector collector = trainer.newGradientCollector()) {
                NDArray loss = trainer.getLoss().evaluate(labels, trainer.forward(data));
                collector.backward(loss);
                return new NDList(loss);
            }
        };
    }

    /** Graphs on every device whose capture runs the region once and whose replay does nothing. */
    private static final class ReplayingNothing implements StepGraphs {
        @Override
        public String whyNot(Device device) {
            return null;
        }

        @Override
        public void enter(Device device) {}

        @Override
        public void exit(Device device) {}

        @Override
        public void awaitOtherThreads(Device device) {}

        @Override
        public StepGraph capture(Device device, Runnable region) {
            region.run();
            return new StepGraph() {
                @Override
                public void replay() {}

                @Override
                public void close() {}
            };
        }
    }
}
