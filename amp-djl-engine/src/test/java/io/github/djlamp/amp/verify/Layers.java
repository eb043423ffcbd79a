package io.github.djlamp.amp.verify;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.List;
import java.util.function.UnaryOperator;

/** Runs the kernel check on one freshly initialised layer and a random input. */
final class Layers {

    private Layers() {}

    static KernelVerdict check(
            AmpBackend backend,
            Block block,
            Shape inputShape,
            Precision precision,
            List<MemoryLayout> candidates,
            NDManager manager) {
        return check(backend, block, inputShape, precision, candidates, manager, x -> x);
    }

    /** Checks as above on the random input as {@code plant} changes it (in place or anew). */
    static KernelVerdict check(
            AmpBackend backend,
            Block block,
            Shape inputShape,
            Precision precision,
            List<MemoryLayout> candidates,
            NDManager manager,
            UnaryOperator<NDArray> plant) {
        Engine.getInstance().setRandomSeed(11);
        block.initialize(manager, DataType.FLOAT32, inputShape);
        NDArray input = plant.apply(manager.randomNormal(0, 1, inputShape, DataType.FLOAT32));
        input.setRequiresGradient(true);
        return new KernelVerifier(backend)
                .verdict(
                        block,
                        "test/" + block.getClass().getSimpleName(),
                        input,
                        new ParameterStore(manager, false),
                        false,
                        precision,
                        candidates);
    }
}
