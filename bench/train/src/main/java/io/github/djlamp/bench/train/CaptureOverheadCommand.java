package io.github.djlamp.bench.train;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.training.EasyTrain;
import ai.djl.training.GradientCollector;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset;
import ai.djl.translate.TranslateException;
import ai.djl.util.Progress;
import io.github.djlamp.amp.capture.CapturedStep;
import io.github.djlamp.amp.capture.StepBody;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
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

    @Option(
            names = "--loop",
            defaultValue = "custom",
            description =
                    "custom (AmpSession.captureStep) or easytrain (EasyTrain.fit, its whole batch"
                            + " timed: the loop, its listeners and trainer.step())")
    String loop;

    @Override
    public Integer call() {
        Network net = Network.of(network);
        if (loop.equals("easytrain")) {
            return easyTrain(net);
        }
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

    /**
     * {@code EasyTrain.fit}'s batches, eager ({@value CapturedStep#PROPERTY}=off) and then captured
     * on graphs that replay nothing, each in a trainer of its own: the time between one batch's
     * fetch and the next's.
     */
    private Integer easyTrain(Network net) {
        String before = System.getProperty(CapturedStep.PROPERTY);
        Samples e;
        try {
            System.setProperty(CapturedStep.PROPERTY, "off");
            e = new Samples(fitBatchTimes(net, null, eagerSteps));
        } finally {
            if (before == null) {
                System.clearProperty(CapturedStep.PROPERTY);
            } else {
                System.setProperty(CapturedStep.PROPERTY, before);
            }
        }
        Samples r = new Samples(fitBatchTimes(net, new ReplayingNothing(), steps));
        System.out.printf(
                "%s %s batch %d, EasyTrain.fit: eager batch median %.3f ms; replayed batch (host"
                        + " part, graphs replaying nothing) median %.4f ms (IQR %.4f-%.4f) over %d"
                        + " batches, %.2f%% of the eager one%n",
                net.key(),
                variant,
                batch,
                e.median(),
                r.median(),
                r.quantile(0.25),
                r.quantile(0.75),
                steps,
                100 * r.median() / e.median());
        return 0;
    }

    /**
     * Times {@code timed} batches of {@code EasyTrain.fit} after its first step, warm-up steps and
     * capture; with {@code graphs}, captured on them.
     */
    private double[] fitBatchTimes(Network net, StepGraphs graphs, int timed) {
        int skipped = CapturedStep.DEFAULT_WARM_UP_STEPS + 2;
        try (TrainingRig rig = TrainingRig.create(net, Variant.of(variant), batch)) {
            Trainer trainer = rig.getTrainer();
            rig.step(); // the first step, outside EasyTrain.fit: kernel checks
            AmpSession.of(trainer).setStepGraphs(graphs);
            try (NDManager pool = trainer.getManager().newSubManager()) {
                List<Batch> batches = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    Batch b = rig.randomBatch();
                    b.getData().attach(pool);
                    b.getLabels().attach(pool);
                    batches.add(b);
                }
                long[] fetched = new long[skipped + timed + 1];
                Dataset dataset = new PooledBatches(trainer, batches, fetched);
                EasyTrain.fit(trainer, 1, dataset, null);
                double[] times = new double[timed];
                for (int i = 0; i < timed; i++) {
                    times[i] = (fetched[skipped + i + 1] - fetched[skipped + i]) / 1e6;
                }
                return times;
            } catch (IOException | TranslateException ex) {
                throw new IllegalStateException(ex);
            }
        }
    }

    /**
     * Batches over the pool's arrays, the time of each fetch recorded; the last one only fetched.
     */
    private static final class PooledBatches implements Dataset {
        private final Trainer trainer;
        private final List<Batch> pool;
        private final long[] fetched;

        PooledBatches(Trainer trainer, List<Batch> pool, long[] fetched) {
            this.trainer = trainer;
            this.pool = pool;
            this.fetched = fetched;
        }

        @Override
        public Iterable<Batch> getData(NDManager manager) {
            return () ->
                    new Iterator<>() {
                        private int next;

                        @Override
                        public boolean hasNext() {
                            return next < fetched.length;
                        }

                        @Override
                        public Batch next() {
                            fetched[next] = System.nanoTime();
                            Batch b = pool.get(next++ % pool.size());
                            // a batch owns its arrays (DJL's Batch attaches them): copies, as a
                            // dataset's batchifier makes them
                            return new Batch(
                                    trainer.getManager().newSubManager(),
                                    new NDList(b.getData().head().duplicate()),
                                    new NDList(b.getLabels().head().duplicate()),
                                    b.getSize(),
                                    null,
                                    null,
                                    0,
                                    1);
                        }
                    };
        }

        @Override
        public void prepare(Progress progress) {}
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
        public boolean replaysTheStep() {
            return false; // nothing to check a replay against
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
