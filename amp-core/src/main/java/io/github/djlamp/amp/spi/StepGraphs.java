package io.github.djlamp.amp.spi;

import ai.djl.Device;

/**
 * An engine's graphs of device work (CUDA graphs): a region of a training step captured once and
 * replayed in one launch ({@link AmpBackend#stepGraphs()}). A capture records the work the region's
 * Java code asks of the device without running it; a replay runs that work again on the same
 * arrays, and none of the region's Java code.
 */
public interface StepGraphs {

    /**
     * Graphs that an engine layer does not have: every capture is refused with {@code reason}.
     *
     * @param reason why, in a user's terms
     * @return graphs whose {@link #whyNot(Device)} is {@code reason} on every device
     */
    static StepGraphs unavailable(String reason) {
        return new StepGraphs() {
            @Override
            public String whyNot(Device device) {
                return reason;
            }

            @Override
            public void enter(Device device) {
                throw new UnsupportedOperationException(reason);
            }

            @Override
            public void exit(Device device) {}

            @Override
            public void awaitOtherThreads(Device device) {}

            @Override
            public StepGraph capture(Device device, Runnable region) {
                throw new UnsupportedOperationException(reason);
            }
        };
    }

    /**
     * Returns why regions cannot be captured on {@code device}.
     *
     * @param device the trainer's device
     * @return the reason in a user's terms, or null when they can
     */
    String whyNot(Device device);

    /**
     * Returns whether a replay computes the captured step, so that the first one can be checked
     * against an eager step of the same batch: true for real graphs; a stand-in whose replays do
     * nothing (a measurement of the host's part) returns false.
     *
     * @return whether replays are checked
     */
    default boolean replaysTheStep() {
        return true;
    }

    /**
     * Returns whether {@link #saveRandomPosition} can put {@code device}'s default random-number
     * generator back, so that a replay and an eager step from the same position draw the same
     * numbers (dropout's masks): a replay draws from where the generator stands and moves it on by
     * what the step draws, as the eager step does.
     *
     * @param device the trainer's device
     * @return whether steps with random draws can be compared
     */
    default boolean repeatsRandomDraws(Device device) {
        return false;
    }

    /**
     * Saves where {@code device}'s default random-number generator stands, between steps.
     *
     * @param device the trainer's device
     * @return what puts it back there
     * @throws UnsupportedOperationException where {@link #repeatsRandomDraws(Device)} is false
     */
    default RandomPosition saveRandomPosition(Device device) {
        throw new UnsupportedOperationException(
                "these graphs cannot save the random-number generator's position on " + device);
    }

    /** A saved position of a device's random-number generator. */
    @FunctionalInterface
    interface RandomPosition {
        /** Puts the generator back where it stood when saved. */
        void restore();
    }

    /**
     * Makes the calling thread's work on {@code device} run on a stream of its own, where captures
     * can take place; the steps before the capture (warm-up) must run there too.
     *
     * @param device the device
     */
    void enter(Device device);

    /**
     * Waits for the device, then gives the calling thread back the stream {@link #enter(Device)}
     * replaced.
     *
     * @param device the device
     */
    void exit(Device device);

    /**
     * Makes the calling thread's entered stream wait, on the device, for the work other threads
     * queued there before now (a data loader's batch, made on the device's default stream), before
     * a step reads the batch. The host does not wait.
     *
     * @param device the device, entered by this thread
     */
    void awaitOtherThreads(Device device);

    /**
     * Captures what {@code region} asks of the device, then runs it once (a capture alone runs
     * nothing). An exception of {@code region} ends the capture and is thrown on.
     *
     * @param device the device, entered by this thread
     * @param region the Java code whose device work is captured
     * @return the graph, or null when the device's runtime invalidated the capture (a host read or
     *     a synchronization in it): nothing ran then
     */
    StepGraph capture(Device device, Runnable region);
}
