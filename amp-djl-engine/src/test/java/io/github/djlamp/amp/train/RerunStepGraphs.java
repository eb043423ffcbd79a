package io.github.djlamp.amp.train;

import ai.djl.Device;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;

/**
 * Graphs that stand in for an engine's on every device: a capture runs the region, a replay runs it
 * again, so the results are an eager step's (what a replay of a right capture gives).
 */
final class RerunStepGraphs implements StepGraphs {

    int captures;
    int replays;

    @Override
    public String whyNot(Device device) {
        return null;
    }

    @Override
    public void enter(Device device) {}

    @Override
    public void exit(Device device) {}

    @Override
    public StepGraph capture(Device device, Runnable region) {
        captures++;
        region.run();
        return new StepGraph() {
            @Override
            public void replay() {
                replays++;
                region.run();
            }

            @Override
            public void close() {}
        };
    }
}
