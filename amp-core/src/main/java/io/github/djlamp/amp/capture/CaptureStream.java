package io.github.djlamp.amp.capture;

/**
 * The calling thread's place on the graphs' stream: entered, its work runs on the stream captures
 * take place on and the session's host reads of device state wait between steps; left, both are as
 * they were.
 */
final class CaptureStream {

    private final CaptureHooks hooks;
    private boolean entered;

    CaptureStream(CaptureHooks hooks) {
        this.hooks = hooks;
    }

    /** The thread's work moves to the graphs' stream; the session's host reads leave the step. */
    void enter() {
        hooks.begin();
        hooks.graphs().enter(hooks.device());
        entered = true;
    }

    /** Puts the thread's stream and the session's host reads back as they were; once. */
    void leave() {
        if (entered) {
            entered = false;
            try {
                hooks.graphs().exit(hooks.device());
            } finally {
                hooks.end();
            }
        }
    }

    boolean isEntered() {
        return entered;
    }
}
