package io.github.djlamp.amp.distributed;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.initializer.Initializer;
import ai.djl.util.Pair;

/**
 * An initializer that makes every rank start from rank 0's value: it runs the parameter's own
 * initializer, then overwrites the result with rank 0's. Every rank initializes its parameters in
 * the same order (the block's), so the broadcasts pair up.
 */
final class BroadcastInitializer implements Initializer {

    private final Initializer inner;
    private final World world;
    private final String name;

    BroadcastInitializer(Initializer inner, World world, String name) {
        this.inner = inner;
        this.world = world;
        this.name = name;
    }

    Initializer getInner() {
        return inner;
    }

    /** {@inheritDoc} */
    @Override
    public NDArray initialize(NDManager manager, Shape shape, DataType dataType) {
        NDArray array = inner.initialize(manager, shape, dataType);
        broadcast(array, world, name);
        return array;
    }

    /**
     * Overwrites every initialized parameter of a block with rank 0's value, and wraps the
     * initializer of each one not initialized yet so that it takes rank 0's value when it is.
     */
    static void broadcastParameters(Block block, World world) {
        for (Pair<String, Parameter> pair : block.getParameters()) {
            Parameter parameter = pair.getValue();
            if (parameter.isInitialized()) {
                broadcast(parameter.getArray(), world, pair.getKey());
            } else if (parameter.getInitializer() != null
                    && !(parameter.getInitializer() instanceof BroadcastInitializer)) {
                parameter.setInitializer(
                        new BroadcastInitializer(parameter.getInitializer(), world, pair.getKey()));
            }
        }
    }

    /** Overwrites an array on every rank with rank 0's value (a copy through the host). */
    static void broadcast(NDArray array, World world, String name) {
        if (world.getSize() == 1) {
            return;
        }
        SameSetup.requireSameShape(array.getShape(), world, name);
        java.nio.ByteBuffer host = array.toByteBuffer();
        java.nio.ByteBuffer direct =
                java.nio.ByteBuffer.allocateDirect(host.remaining()).order(host.order());
        direct.put(host).flip();
        world.broadcast(direct, direct.remaining(), "broadcast of parameter " + name);
        array.set(direct);
    }
}
