package io.github.djlamp.amp.capture;

import java.util.List;
import java.util.Locale;

/** Why a step will not be captured, decided once before its first run. */
final class CaptureRefusal {

    private CaptureRefusal() {}

    /**
     * Returns the first reason that holds: capture turned off ({@value CapturedStep#PROPERTY}), no
     * graphs on the device, then every reason of the session's.
     *
     * @return the reason, or null when the step can be captured
     */
    static String first(CaptureHooks hooks) {
        String off = System.getProperty(CapturedStep.PROPERTY);
        if (off != null && off.trim().toLowerCase(Locale.ROOT).equals("off")) {
            return "turned off by -D" + CapturedStep.PROPERTY + "=off";
        }
        String engine = hooks.graphs().whyNot(hooks.device());
        if (engine != null) {
            return engine;
        }
        List<String> session = hooks.refusals();
        return session.isEmpty() ? null : String.join("; ", session);
    }
}
