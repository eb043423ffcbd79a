package io.github.djlamp.amp.diagnostics;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.KnownComposites;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;

/**
 * Finds the layers a policy runs in 16 bits, walking the tree as djl-amp's wrapper does: it
 * descends only into {@link CastCategory#CONTAINER} blocks, hands a SequentialBlock's children
 * their predecessor's outputs and a ParallelBlock's children the block's own inputs, and treats
 * every other block as one unit. Shapes are propagated with DJL's {@link
 * Block#getOutputShapes(Shape[])}, which needs no initialized parameters (but does need an engine
 * for lambda blocks and ParallelBlock joins, which DJL runs on zeros).
 */
final class LowPrecisionLayers {

    private final PrecisionPolicy policy;
    private final Shape[] modelInputs;
    private final List<Found> found = new ArrayList<>();

    private LowPrecisionLayers(PrecisionPolicy policy, Shape[] modelInputs) {
        this.policy = policy;
        this.modelInputs = modelInputs;
    }

    /** Returns the 16-bit layers of {@code root} in forward order. */
    static List<Found> find(Block root, PrecisionPolicy policy, Shape[] inputs) {
        LowPrecisionLayers walk = new LowPrecisionLayers(policy, inputs);
        walk.visit(root, "", inputs, true);
        return walk.found;
    }

    private Shape[] visit(Block block, String path, Shape[] inputs, boolean readsModelInput) {
        CastCategory category = policy.categoryOf(block, path);
        if (category == CastCategory.CONTAINER) {
            return visitContainer(block, path, inputs, readsModelInput);
        }
        if (category == CastCategory.LOW) {
            found.add(new Found(path, block, inputs, readsModelInput, gemmOf(block, path, inputs)));
        }
        return outputShapes(block, path, inputs);
    }

    private Shape[] visitContainer(
            Block block, String path, Shape[] inputs, boolean readsModelInput) {
        if (block instanceof SequentialBlock) {
            Shape[] current = inputs;
            boolean first = true;
            for (Pair<String, Block> child : block.getChildren()) {
                String childPath = BlockPaths.child(path, child.getKey());
                current = visit(child.getValue(), childPath, current, readsModelInput && first);
                first = false;
            }
            return ((SequentialBlock) block).isReturnIntermediate() && !first
                    ? outputShapes(block, path, inputs)
                    : current;
        }
        if (block instanceof ParallelBlock) {
            for (Pair<String, Block> child : block.getChildren()) {
                String childPath = BlockPaths.child(path, child.getKey());
                visit(child.getValue(), childPath, inputs, readsModelInput);
            }
            return outputShapes(block, path, inputs);
        }
        if (block instanceof BertBlock || block instanceof BertPretrainingBlock) {
            // its layers read shapes only its forward derives: reported as one unit here
            return outputShapes(block, path, inputs);
        }
        if (KnownComposites.isMirrored(block)) {
            // a transformer block's layers all read arrays of its input's shape (B, S, E)
            for (Pair<String, Block> child : block.getChildren()) {
                String childPath = BlockPaths.child(path, child.getKey());
                visit(child.getValue(), childPath, new Shape[] {inputs[0]}, false);
            }
            return outputShapes(block, path, inputs);
        }
        throw new IllegalArgumentException(
                "The policy treats "
                        + LayerNames.describe(path, block)
                        + " as a container, but djl-amp can only descend into SequentialBlock and"
                        + " ParallelBlock; override it as fp32, low or pass_through instead");
    }

    private LayerGemm gemmOf(Block block, String path, Shape[] inputs) {
        try {
            if (block instanceof Linear) {
                return LinearGemm.of((Linear) block, path, inputs);
            }
            if (block instanceof Convolution) {
                return ConvolutionGemm.of((Convolution) block, path, inputs);
            }
            return LayerGemm.unknown(inputs.length == 1 ? inputs[0].dimension() : -1);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(
                    e.getMessage()
                            + " (the report's input shapes: "
                            + LayerNames.shapes(modelInputs)
                            + ")",
                    e);
        }
    }

    private Shape[] outputShapes(Block block, String path, Shape[] inputs) {
        try {
            return block.getOutputShapes(inputs);
        } catch (EngineException e) {
            throw new IllegalStateException(
                    "Cannot compute the output shapes of "
                            + LayerNames.describe(path, block)
                            + ": DJL runs it on zeros to find them, which needs an engine (e.g."
                            + " ai.djl.pytorch:pytorch-engine) on the classpath",
                    e);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(
                    "Cannot compute the output shapes of "
                            + LayerNames.describe(path, block)
                            + " for its input "
                            + LayerNames.shapes(inputs)
                            + ": "
                            + e
                            + "; give the report the shapes the model's forward receives, batch"
                            + " dimension first (the report's input shapes: "
                            + LayerNames.shapes(modelInputs)
                            + ")",
                    e);
        }
    }

    /** One 16-bit layer as the walk found it. */
    static final class Found {
        final String path;
        final Block block;
        final Shape[] inputs;
        final boolean readsModelInput;
        final LayerGemm gemm;

        Found(String path, Block block, Shape[] inputs, boolean readsModelInput, LayerGemm gemm) {
            this.path = path;
            this.block = block;
            this.inputs = inputs.clone();
            this.readsModelInput = readsModelInput;
            this.gemm = gemm;
        }
    }
}
