package io.github.djlamp.amp.reliability;

import ai.djl.ndarray.NDArray;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.util.Pair;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;

/**
 * Every piece of a DJL optimizer's state (moment arrays, update counts), read through reflection
 * into plain values that compare bitwise; parameter ids (unique per run) are replaced by parameter
 * names.
 */
final class OptimizerSnapshot {

    private OptimizerSnapshot() {}

    static Map<String, String> of(Optimizer optimizer, Block block) {
        Map<String, String> names = new TreeMap<>();
        for (Pair<String, Parameter> p : block.getParameters()) {
            names.put(p.getValue().getId(), p.getKey());
        }
        Map<String, String> state = new TreeMap<>();
        for (Class<?> c = optimizer.getClass(); c != Object.class; c = c.getSuperclass()) {
            for (Field field : c.getDeclaredFields()) {
                if (Modifier.isStatic(field.getModifiers())) {
                    continue;
                }
                field.setAccessible(true);
                try {
                    describe(
                            c.getSimpleName() + "." + field.getName(),
                            field.get(optimizer),
                            names,
                            state);
                } catch (IllegalAccessException e) {
                    throw new AssertionError(e);
                }
            }
        }
        return state;
    }

    private static void describe(
            String key, Object value, Map<String, String> names, Map<String, String> state) {
        if (value instanceof NDArray) {
            float[] values = ((NDArray) value).toFloatArray();
            int[] bits = new int[values.length];
            for (int i = 0; i < values.length; i++) {
                bits[i] = Float.floatToRawIntBits(values[i]);
            }
            state.put(key, Arrays.toString(bits));
        } else if (value instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                String k = String.valueOf(e.getKey());
                describe(key + "[" + names.getOrDefault(k, k) + "]", e.getValue(), names, state);
            }
        } else if (value == null || value instanceof Number || value instanceof Boolean) {
            state.put(key, String.valueOf(value));
        }
    }
}
