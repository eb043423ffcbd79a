package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.internal.DjlSeam;

/**
 * The one route to the settings and state of DJL's optimizers, which DJL keeps in private fields
 * with no getters: each {@link FusedOptimizerKind}, {@link FusedUpdate} and {@link
 * OptimizerStateFile} read and write them here, through {@link DjlSeam}.
 */
final class DjlOptimizers {

    private DjlOptimizers() {}

    /** Reads a private field the optimizer's own class declares. */
    static Object read(Optimizer optimizer, String name) {
        return read(optimizer, optimizer.getClass(), name);
    }

    /** Reads a private field that {@code owner} declares (one of those DjlSeam checks). */
    static Object read(Object target, Class<?> owner, String name) {
        return DjlSeam.read(target, owner, name);
    }

    /** Writes a private field that {@code owner} declares (one of those DjlSeam checks). */
    static void write(Object target, Class<?> owner, String name, Object value) {
        DjlSeam.write(target, owner, name, value);
    }
}
