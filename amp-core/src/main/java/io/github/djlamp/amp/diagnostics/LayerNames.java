package io.github.djlamp.amp.diagnostics;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import java.util.Arrays;
import java.util.stream.Collectors;

/** How layers, paths and shapes are written in the report and its messages. */
final class LayerNames {

    /** How the root block's empty path is shown. */
    static final String ROOT = "(root)";

    private LayerNames() {}

    static String displayPath(String path) {
        return path.isEmpty() ? ROOT : path;
    }

    /** E.g. {@code Conv2d at '02SequentialBlock/01Conv2d'} or {@code Linear at the root}. */
    static String describe(String path, Block block) {
        String name = block.getClass().getSimpleName();
        return path.isEmpty() ? name + " at the root" : name + " at '" + path + "'";
    }

    static String shapes(Shape[] shapes) {
        return Arrays.stream(shapes)
                .map(String::valueOf)
                .collect(Collectors.joining(", ", "[", "]"));
    }
}
