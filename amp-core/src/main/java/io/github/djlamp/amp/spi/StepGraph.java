package io.github.djlamp.amp.spi;

/** A captured region of a training step ({@link StepGraphs#capture}): replayed, then closed. */
public interface StepGraph extends AutoCloseable {

    /** Runs the captured device work again, on the arrays the capture used. */
    void replay();

    /**
     * Waits for the graph's replays to finish on the device, then frees the graph and its memory
     * pool; arrays made in the capture become invalid.
     */
    @Override
    void close();
}
