package io.github.djlamp.amp.bytecode;

import ai.djl.nn.LambdaBlock;
import io.github.djlamp.amp.internal.DjlSeam;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The values a DJL factory's lambda captured (the kernel, stride, padding and ceiling mode of
 * {@code Pool.maxPool2dBlock}), read from the lambda object's fields, through the wrapper {@code
 * LambdaBlock.singleton} adds where there is one.
 */
public final class CapturedValues {

    private CapturedValues() {}

    /**
     * Returns the values {@code block}'s function captured, in the order of the lambda object's
     * fields (javac's: the order the body names them), or null where they cannot be read.
     *
     * @param block the block
     * @return the captured values, or null
     */
    public static List<Object> of(LambdaBlock block) {
        Object function;
        try {
            function = DjlSeam.lambdaFunction(block);
        } catch (RuntimeException e) {
            return null;
        }
        List<Object> values = read(function);
        if (values != null && values.size() == 1 && values.get(0) instanceof Function) {
            // LambdaBlock.singleton's wrapper: the factory's own lambda is the one it captured
            values = read(values.get(0));
        }
        return values;
    }

    /** The values a lambda object captured, in its fields' order, or null. */
    static List<Object> read(Object lambda) {
        if (lambda == null || !lambda.getClass().isSynthetic() && !lambda.getClass().isHidden()) {
            return null;
        }
        List<Object> values = new ArrayList<>();
        try {
            for (Field field : lambda.getClass().getDeclaredFields()) {
                if (!Modifier.isStatic(field.getModifiers())) {
                    field.setAccessible(true);
                    values.add(field.get(lambda));
                }
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
        return values;
    }
}
