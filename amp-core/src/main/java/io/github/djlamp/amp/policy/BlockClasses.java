package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;

/** Loads the block classes named in policy strings and config maps. */
final class BlockClasses {

    private BlockClasses() {}

    /**
     * Loads a block class by binary name, without initializing it, through the thread's context
     * class loader and then this library's.
     *
     * @throws IllegalArgumentException when no such class exists, or it is not a block class
     */
    static Class<? extends Block> load(String className) {
        String name = className == null ? "" : className.trim();
        if (name.isEmpty()) {
            throw new IllegalArgumentException(
                    "Empty class name in a class override; expected the binary name of a class"
                            + " implementing ai.djl.nn.Block, e.g. ai.djl.nn.norm.LayerNorm");
        }
        Class<?> loaded = find(name);
        if (loaded == null) {
            throw new IllegalArgumentException(
                    "Unknown block class '"
                            + name
                            + "' in a class override: no such class on the classpath; expected the"
                            + " binary name of a class implementing ai.djl.nn.Block, e.g."
                            + " ai.djl.nn.norm.LayerNorm (nested classes as Outer$Inner)");
        }
        if (!Block.class.isAssignableFrom(loaded) || loaded.isInterface()) {
            throw new IllegalArgumentException(
                    "Class '"
                            + name
                            + "' in a class override is not a block: expected a class implementing"
                            + " ai.djl.nn.Block"
                            + (loaded.isInterface() ? ", not an interface" : ""));
        }
        return loaded.asSubclass(Block.class);
    }

    private static Class<?> find(String name) {
        ClassLoader context = Thread.currentThread().getContextClassLoader();
        if (context != null) {
            try {
                return Class.forName(name, false, context);
            } catch (ClassNotFoundException | LinkageError e) {
                // fall through to this library's loader
            }
        }
        try {
            return Class.forName(name, false, BlockClasses.class.getClassLoader());
        } catch (ClassNotFoundException | LinkageError e) {
            return null;
        }
    }
}
