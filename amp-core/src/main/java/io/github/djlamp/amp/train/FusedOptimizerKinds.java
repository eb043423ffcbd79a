package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.exception.AmpException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The DJL optimizers djl-amp runs fused and whose state it saves: one {@link FusedOptimizerKind}
 * per DJL optimizer class, matched exactly (a subclass of {@code Adam} may update otherwise, so it
 * keeps DJL's own update). A new fused optimizer is a file beside {@link FusedSgd} and a line here.
 */
final class FusedOptimizerKinds {

    private static final Map<Class<?>, FusedOptimizerKind> BY_CLASS = new LinkedHashMap<>();

    static {
        register(new FusedSgd());
        register(new FusedAdam());
        register(new FusedAdamW());
        register(new FusedNag());
    }

    private FusedOptimizerKinds() {}

    private static void register(FusedOptimizerKind kind) {
        for (FusedOptimizerKind other : BY_CLASS.values()) {
            if (other.stateFileCode() == kind.stateFileCode()) {
                throw new IllegalStateException(
                        kind.getClass().getSimpleName()
                                + " reuses the state file code of "
                                + other.getClass().getSimpleName());
            }
        }
        BY_CLASS.put(kind.optimizerClass(), kind);
    }

    /**
     * Returns the kind of DJL's optimizer.
     *
     * @param optimizer the optimizer
     * @return its kind, or null when its class is none of {@link #names()}
     */
    static FusedOptimizerKind of(Optimizer optimizer) {
        return BY_CLASS.get(optimizer.getClass());
    }

    /**
     * Returns the kind of DJL's optimizer, or throws for one djl-amp does not know.
     *
     * @param optimizer the optimizer
     * @param what what djl-amp was asked to do with it, for the message
     * @return its kind
     * @throws AmpException naming the optimizers djl-amp knows
     */
    static FusedOptimizerKind require(Optimizer optimizer, String what) {
        FusedOptimizerKind kind = of(optimizer);
        if (kind == null) {
            throw new AmpException(
                    "djl-amp "
                            + what
                            + " of DJL's "
                            + names()
                            + ", not of "
                            + optimizer.getClass().getName());
        }
        return kind;
    }

    /**
     * Returns the kind a state file's code stands for.
     *
     * @param code the code in the file's header
     * @return the kind, or null for a code no kind has
     */
    static FusedOptimizerKind ofStateFileCode(int code) {
        for (FusedOptimizerKind kind : BY_CLASS.values()) {
            if (kind.stateFileCode() == code) {
                return kind;
            }
        }
        return null;
    }

    /**
     * Names DJL's optimizers that have a kind, for messages.
     *
     * @return e.g. {@code Sgd, Adam and AdamW}
     */
    static String names() {
        String all =
                BY_CLASS.keySet().stream()
                        .map(Class::getSimpleName)
                        .collect(Collectors.joining(", "));
        int last = all.lastIndexOf(", ");
        return last < 0 ? all : all.substring(0, last) + " and " + all.substring(last + 2);
    }
}
