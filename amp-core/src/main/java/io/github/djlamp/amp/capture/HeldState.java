package io.github.djlamp.amp.capture;

import java.util.ArrayList;
import java.util.List;

/**
 * The arrays a graph reads and writes in place, as they were at its capture: a replay is right only
 * while the session still holds the very same ones (a loaded optimizer, scaler or parameter state
 * replaces them, and a graph would go on updating the old).
 */
final class HeldState {

    private final List<Object> captured = new ArrayList<>();
    private final List<Object> current = new ArrayList<>();

    /** Remembers the session's arrays at a capture. */
    void remember(CaptureHooks hooks) {
        captured.clear();
        hooks.stateArrays(captured);
    }

    /** Whether the session's arrays are still those remembered: compared by identity. */
    boolean isHeld(CaptureHooks hooks) {
        current.clear();
        hooks.stateArrays(current);
        if (current.size() != captured.size()) {
            return false;
        }
        for (int i = 0; i < current.size(); i++) {
            if (current.get(i) != captured.get(i)) {
                return false;
            }
        }
        return true;
    }
}
