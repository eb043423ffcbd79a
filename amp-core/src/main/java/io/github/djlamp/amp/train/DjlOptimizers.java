package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Optimizer;
import io.github.djlamp.amp.AmpException;
import java.lang.reflect.Field;

/**
 * The one route to the settings and state of DJL's optimizers, which DJL keeps in private fields
 * with no getters: each {@link FusedOptimizerKind}, {@link FusedUpdate} and {@link
 * OptimizerStateFile} read and write them here.
 */
final class DjlOptimizers {

    private DjlOptimizers() {}

    /** Reads a private field the optimizer's own class declares. */
    static Object read(Optimizer optimizer, String name) {
        return read(optimizer, optimizer.getClass(), name);
    }

    /** Reads a private field that {@code owner} declares. */
    static Object read(Object target, Class<?> owner, String name) {
        try {
            return accessible(owner, name).get(target);
        } catch (IllegalAccessException e) {
            throw unreachable(owner, name, e);
        }
    }

    /** Writes a private field that {@code owner} declares. */
    static void write(Object target, Class<?> owner, String name, Object value) {
        try {
            accessible(owner, name).set(target, value);
        } catch (IllegalAccessException e) {
            throw unreachable(owner, name, e);
        }
    }

    private static Field accessible(Class<?> owner, String name) {
        try {
            Field field = owner.getDeclaredField(name);
            field.setAccessible(true);
            return field;
        } catch (NoSuchFieldException e) {
            throw unreachable(owner, name, e);
        }
    }

    private static AmpException unreachable(Class<?> owner, String name, Exception e) {
        return new AmpException(
                "Cannot reach "
                        + owner.getSimpleName()
                        + "."
                        + name
                        + " (djl-amp is built for DJL 0.35.1): "
                        + e,
                e);
    }
}
