package io.github.djlamp.amp.train;

import ai.djl.Device;
import ai.djl.engine.Engine;
import io.github.djlamp.amp.pytorch.PtAmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;

/**
 * Graphs that stand in for an engine's on every device, where there is no GPU: the captured step's
 * plan runs on the CPU against them. None replays device work; each does what one outcome of a real
 * capture does to the step.
 */
abstract class StandInStepGraphs implements StepGraphs {

    @Override
    public String whyNot(Device device) {
        return null;
    }

    int enters;
    int exits;

    @Override
    public void enter(Device device) {
        enters++;
    }

    @Override
    public void exit(Device device) {
        exits++;
    }

    @Override
    public void awaitOtherThreads(Device device) {}

    /** A graph whose replay runs {@code replay}. */
    static StepGraph graph(Runnable replay) {
        return new StepGraph() {
            @Override
            public void replay() {
                replay.run();
            }

            @Override
            public void close() {}
        };
    }

    /**
     * A capture runs the region, a replay runs it again: the results are an eager step's, what a
     * replay of a right capture gives (its Java code runs again too, so what the host counts in it
     * is counted twice).
     */
    static final class Rerun extends StandInStepGraphs {
        int captures;
        int replays;

        @Override
        public StepGraph capture(Device device, Runnable region) {
            captures++;
            region.run();
            return graph(
                    () -> {
                        replays++;
                        region.run();
                    });
        }
    }

    /**
     * {@link Rerun} whose random-number position can be saved and put back, as libtorch's CUDA
     * generator's offset can: here by seeding the CPU's generator afresh at each save and again at
     * each restore. With {@code restores} false the restore does nothing (a generator not put
     * back).
     */
    static final class RepeatingDraws extends StandInStepGraphs {
        private final boolean restores;
        private int seed = 1000;
        int replays;
        int saves;

        RepeatingDraws(boolean restores) {
            this.restores = restores;
        }

        @Override
        public boolean repeatsRandomDraws(Device device) {
            return true;
        }

        @Override
        public RandomPosition saveRandomPosition(Device device) {
            saves++;
            int position = seed++;
            Engine.getInstance().setRandomSeed(position);
            return () -> {
                if (restores) {
                    Engine.getInstance().setRandomSeed(position);
                }
            };
        }

        @Override
        public StepGraph capture(Device device, Runnable region) {
            region.run();
            return graph(
                    () -> {
                        replays++;
                        region.run();
                    });
        }
    }

    /** {@link Rerun}, counting the host reads djl-amp makes inside the region. */
    static final class ReadCounting extends StandInStepGraphs {
        private final PtAmpBackend backend = (PtAmpBackend) AmpBackends.forEngine("PyTorch");
        int regions;
        long readsInside;

        @Override
        public StepGraph capture(Device device, Runnable region) {
            run(region);
            return graph(() -> run(region));
        }

        private void run(Runnable region) {
            long before = backend.getHostReadCount();
            region.run();
            readsInside += backend.getHostReadCount() - before;
            regions++;
        }
    }

    /** A replay does nothing: only what the host counts moves. */
    /** A replay that does nothing, declared so: a measurement of the host's part of a step. */
    static final class NoReplay extends StandInStepGraphs {
        int captures;

        @Override
        public boolean replaysTheStep() {
            return false;
        }

        @Override
        public StepGraph capture(Device device, Runnable region) {
            captures++;
            region.run();
            return graph(() -> {});
        }
    }

    /** A replay that does nothing but claims to compute the step: a graph gone wrong. */
    static final class Inert extends StandInStepGraphs {
        int replays;

        @Override
        public StepGraph capture(Device device, Runnable region) {
            region.run();
            return graph(() -> replays++);
        }
    }

    /**
     * The region ran whole, its Java code and (here) its device work, and only then did the runtime
     * say the capture did not hold, as CUDA does for work another thread launched meanwhile.
     */
    static final class InvalidatedAtTheEnd extends StandInStepGraphs {
        @Override
        public StepGraph capture(Device device, Runnable region) {
            region.run();
            return null;
        }
    }

    /** The runtime invalidated the capture before the region ran anything. */
    static final class Invalidated extends StandInStepGraphs {
        @Override
        public StepGraph capture(Device device, Runnable region) {
            return null;
        }
    }
}
