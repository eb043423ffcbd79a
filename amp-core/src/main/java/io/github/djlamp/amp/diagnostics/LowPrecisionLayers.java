package io.github.djlamp.amp.diagnostics;

import ai.djl.engine.EngineException;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Convolution;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.BertMaskedLanguageModelBlock;
import ai.djl.nn.transformer.BertPretrainingBlock;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.BlockPlan;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.KnownComposites;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Finds the layers a policy runs in 16 bits, walking the tree as djl-amp's wrapper runs it: from
 * the tree's {@link ModelPlan}, the plan the shadow tree is built from. It descends into containers
 * and the DJL composites djl-amp runs layer by layer ({@link BlockPlan.Strategy#COMPOSITE}:
 * attention, transformer encoder and BERT blocks), hands a SequentialBlock's children their
 * predecessor's outputs, a ParallelBlock's children the block's own inputs and a composite's
 * children the shapes its forward hands them, and lists every unit the plan runs in {@link
 * CastCategory#LOW} (the engine's own autocast included), and each block whose own code runs over
 * its children ({@link BlockPlan.Strategy#READ}, DJL's YOLOv3) as one layer of unknown kind: the
 * shapes its code hands its children are known only by running it. Shapes are propagated with DJL's
 * {@link Block#getOutputShapes(Shape[])}, which needs no initialized parameters (but does need an
 * engine for lambda blocks and ParallelBlock joins, which DJL runs on zeros).
 */
final class LowPrecisionLayers {

    private final ModelPlan plan;
    private final Shape[] modelInputs;
    private final List<Found> found = new ArrayList<>();

    private LowPrecisionLayers(ModelPlan plan, Shape[] modelInputs) {
        this.plan = plan;
        this.modelInputs = modelInputs;
    }

    /** Returns the 16-bit layers of {@code root} in forward order. */
    static List<Found> find(Block root, PrecisionPolicy policy, Shape[] inputs) {
        ModelPlan plan = ModelPlan.of(policy, root, AmpBackends::supportEngineAutocast);
        LowPrecisionLayers walk = new LowPrecisionLayers(plan, inputs);
        walk.visit(root, "", inputs, true, true);
        return walk.found;
    }

    /**
     * Visits a block the plan holds.
     *
     * @param outputNeeded whether the caller reads the block's output shapes: a composite's child
     *     gets its input shapes from the composite, never from its predecessor
     * @return the block's output shapes, or null where they are not needed
     */
    private Shape[] visit(
            Block block,
            String path,
            Shape[] inputs,
            boolean readsModelInput,
            boolean outputNeeded) {
        BlockPlan planned = plan.get(path);
        switch (planned.getStrategy()) {
            case CONTAINER:
                return visitContainer(block, path, inputs, readsModelInput);
            case COMPOSITE:
                Shape[] outputs = outputShapes(block, path, inputs);
                visitComposite(block, path, inputs, outputs);
                return outputs;
            case READ:
                // what a block's own code hands its children is known only by running it: the
                // block is one layer of unknown kind, as a block autocast runs whole is
                found.add(
                        new Found(
                                path, block, inputs, readsModelInput, gemmOf(block, path, inputs)));
                return outputNeeded ? outputShapes(block, path, inputs) : null;
            case STAGE:
            case ENGINE_AUTOCAST:
                if (planned.getCategory() == CastCategory.LOW) {
                    found.add(
                            new Found(
                                    path,
                                    block,
                                    inputs,
                                    readsModelInput,
                                    gemmOf(block, path, inputs)));
                }
                return outputNeeded ? outputShapes(block, path, inputs) : null;
        }
        throw new AssertionError(planned.getStrategy());
    }

    private Shape[] visitContainer(
            Block block, String path, Shape[] inputs, boolean readsModelInput) {
        if (block instanceof SequentialBlock) {
            Shape[] current = inputs;
            boolean first = true;
            for (Pair<String, Block> child : block.getChildren()) {
                String childPath = BlockPaths.child(path, child.getKey());
                current =
                        visit(child.getValue(), childPath, current, readsModelInput && first, true);
                first = false;
            }
            return ((SequentialBlock) block).isReturnIntermediate() && !first
                    ? outputShapes(block, path, inputs)
                    : current;
        }
        if (block instanceof ParallelBlock) {
            for (Pair<String, Block> child : block.getChildren()) {
                String childPath = BlockPaths.child(path, child.getKey());
                visit(child.getValue(), childPath, inputs, readsModelInput, true);
            }
            return outputShapes(block, path, inputs);
        }
        throw new IllegalArgumentException(
                "The policy treats "
                        + LayerNames.describe(path, block)
                        + " as a container, but djl-amp can only descend into SequentialBlock and"
                        + " ParallelBlock; override it as fp32, low or pass_through instead");
    }

    /**
     * Visits the children of a DJL composite djl-amp runs layer by layer ({@link KnownComposites}),
     * each with the shapes DJL's forward hands it.
     */
    private void visitComposite(Block block, String path, Shape[] inputs, Shape[] outputs) {
        for (Pair<String, Block> child : block.getChildren()) {
            String childPath = BlockPaths.child(path, child.getKey());
            Shape[] childInputs =
                    childInputs(
                            block, addedName(child.getKey()), child.getValue(), inputs, outputs);
            visit(child.getValue(), childPath, childInputs, false, false);
        }
    }

    /**
     * The shapes DJL's forward of a composite hands its child {@code name}: BERT's embeddings read
     * the token and type ids (B, S), its encoder blocks (B, S, E) and its pooling projection the
     * first token (B, E); the pretraining heads read what BERT returns. Every layer of an attention
     * or transformer encoder block reads arrays of its input's shape (B, S, E).
     */
    private static Shape[] childInputs(
            Block block, String name, Block child, Shape[] inputs, Shape[] outputs) {
        if (block instanceof BertBlock) {
            switch (name) {
                case "tokenEmbedding":
                    return new Shape[] {inputs[0]};
                case "typeEmbedding":
                    return new Shape[] {inputs[Math.min(1, inputs.length - 1)]};
                case "poolingProjection":
                    return new Shape[] {outputs[1]};
                default:
                    return new Shape[] {outputs[0]}; // norm, dropout, encoder blocks
            }
        }
        if (block instanceof BertPretrainingBlock) {
            if (child instanceof BertBlock) {
                return Arrays.copyOf(inputs, Math.min(3, inputs.length));
            }
            BertBlock bert = bertOf(block);
            Shape[] bertOutputs = bert.getOutputShapes(inputs);
            if (child instanceof BertMaskedLanguageModelBlock && inputs.length > 3) {
                Shape table = new Shape(bert.getTokenDictionarySize(), bert.getEmbeddingSize());
                return new Shape[] {bertOutputs[0], inputs[3], table};
            }
            return new Shape[] {bertOutputs[1]}; // the next-sentence head reads the pooled token
        }
        return new Shape[] {inputs[0]};
    }

    private static BertBlock bertOf(Block pretraining) {
        for (Pair<String, Block> child : pretraining.getChildren()) {
            if (child.getValue() instanceof BertBlock) {
                return (BertBlock) child.getValue();
            }
        }
        throw new IllegalStateException(
                pretraining.getClass().getName() + " holds no BertBlock: another DJL version?");
    }

    /** The name a child was added under: DJL prefixes it with its position. */
    private static String addedName(String childName) {
        return childName.replaceFirst("^[0-9]+", "");
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
