package io.github.djlamp.bench.train;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import java.util.Locale;

/**
 * The networks benchmarked, each with 10 classes: DJL's model-zoo ResNetV1 on 32x32 (or 224x224)
 * images, a stack of DJL's transformer encoder blocks on random sequences, a d2l-style CNN and
 * d2l-java's ResNet-18.
 */
public enum Network {
    /** ResNetV1 with 18 layers on 1x32x32 images. */
    RESNET18("resnet18", 18, new Shape(1, 32, 32)),
    /** ResNetV1 with 50 layers on 3x32x32 images. */
    RESNET50("resnet50", 50, new Shape(3, 32, 32)),
    /** ResNetV1 with 50 layers on 3x224x224 images (ImageNet's size; the GPU benchmark). */
    RESNET50_224("resnet50-224", 50, new Shape(3, 224, 224)),
    /**
     * A SequentialBlock of a Linear projection of 64 features to width 256, 6 {@code
     * TransformerEncoderBlock}s (4 heads, hidden size 1024, GELU, dropout 0: a dropping Dropout
     * cannot be checkpointed), a flatten and a Linear classifier, on sequences of 64 steps of 64
     * features.
     */
    TRANSFORMER("transformer", 6, new Shape(64, 64)),
    /**
     * Issue 29's transformer: 4 {@code TransformerEncoderBlock}s of width 256 (4 heads, hidden size
     * 1024, GELU, dropout 0) straight on sequences of 128 steps of 256 features, a flatten and a
     * Linear classifier (9.4% of the parameters); trained with DJL's Adam (its defaults).
     */
    TRANSFORMER_256("transformer-256", 4, new Shape(128, 256)),
    /**
     * Issue 29's d2l-style network ({@link D2lCnn}: VGG blocks with BatchNorm, every ReLU written
     * {@code .add(Activation::relu)}) on 1x32x32 images.
     */
    D2L_CNN("d2l-cnn", 6, new Shape(1, 32, 32)),
    /**
     * ResNet-18 as d2l-java's chapter 7.6 writes it ({@link D2lResNet}: residual units of the
     * user's own, joined by a lambda) on 1x64x64 images (at 32x32 its last stage is 1x1, where
     * BatchNorm cannot train at batch 1).
     */
    D2L_RESNET18("d2l-resnet18", 18, new Shape(1, 64, 64));

    /** The number of classes of every network. */
    public static final int CLASSES = 10;

    private static final int WIDTH = 256;
    private static final int HEADS = 4;
    private static final int HIDDEN = 1024;

    private final String key;
    private final int layers;
    private final Shape imageShape;

    Network(String key, int layers, Shape imageShape) {
        this.key = key;
        this.layers = layers;
        this.imageShape = imageShape;
    }

    /**
     * Returns the name used on the command line and in result files.
     *
     * @return e.g. {@code resnet18}
     */
    public String key() {
        return key;
    }

    /**
     * Returns a human-readable description, e.g. {@code ResNetV1-18, 1x32x32}.
     *
     * @return the description
     */
    public String describe() {
        if (this == D2L_RESNET18) {
            return "d2l-java's ResNet-18 (its Residual units, a lambda join), " + shapeText();
        }
        if (this == D2L_CNN) {
            return "d2l-style CNN (VGG blocks with BatchNorm, Activation::relu), " + shapeText();
        }
        if (isTransformer()) {
            return "Transformer encoder, "
                    + layers
                    + " blocks of width "
                    + WIDTH
                    + " ("
                    + HEADS
                    + " heads, hidden "
                    + HIDDEN
                    + "), sequences "
                    + imageShape.get(0)
                    + "x"
                    + imageShape.get(1)
                    + (this == TRANSFORMER_256 ? ", Adam" : "");
        }
        return "ResNetV1-" + layers + ", " + shapeText();
    }

    /** The image shape as written in the descriptions, e.g. {@code 1x32x32}. */
    private String shapeText() {
        return imageShape.get(0) + "x" + imageShape.get(1) + "x" + imageShape.get(2);
    }

    /**
     * Builds a fresh, uninitialized block.
     *
     * @return the network
     */
    public Block build() {
        if (this == D2L_CNN) {
            return D2lCnn.build(CLASSES);
        }
        if (this == D2L_RESNET18) {
            return D2lResNet.build(CLASSES);
        }
        if (isTransformer()) {
            SequentialBlock net = new SequentialBlock();
            if (this == TRANSFORMER) {
                net.add(Linear.builder().setUnits(WIDTH).build());
            }
            for (int i = 0; i < layers; i++) {
                net.add(new TransformerEncoderBlock(WIDTH, HEADS, HIDDEN, 0f, Activation::gelu));
            }
            return net.add(Blocks.batchFlattenBlock())
                    .add(Linear.builder().setUnits(CLASSES).build());
        }
        return ResNetV1.builder()
                .setImageShape(imageShape)
                .setNumLayers(layers)
                .setOutSize(CLASSES)
                .build();
    }

    /**
     * Returns whether this is a stack of DJL's transformer encoder blocks.
     *
     * @return true for {@code transformer} and {@code transformer-256}
     */
    public boolean isTransformer() {
        return this == TRANSFORMER || this == TRANSFORMER_256;
    }

    /**
     * Returns the optimizer this network trains with: DJL's Adam with its defaults (learning rate
     * 0.001, betas 0.9 and 0.999, epsilon 1e-8) for {@code transformer-256}, as issue 29 describes
     * it; SGD with learning rate {@link TrainingRig#LEARNING_RATE} and momentum {@link
     * TrainingRig#MOMENTUM} for the others. {@code bench/train/pytorch_resnet.py} uses the same.
     *
     * @return a fresh optimizer
     */
    public Optimizer optimizer() {
        if (this == TRANSFORMER_256) {
            return Optimizer.adam().build();
        }
        return Optimizer.sgd()
                .setLearningRateTracker(Tracker.fixed(TrainingRig.LEARNING_RATE))
                .optMomentum(TrainingRig.MOMENTUM)
                .build();
    }

    /**
     * Returns the shape of a batch of inputs.
     *
     * @param batchSize the batch size
     * @return (batch, channels, height, width), or (batch, steps, features) for the transformer
     */
    public Shape inputShape(int batchSize) {
        return new Shape(batchSize).addAll(imageShape);
    }

    /**
     * Finds a network by its key.
     *
     * @param key e.g. {@code resnet18}
     * @return the network
     * @throws IllegalArgumentException when no network has that key
     */
    public static Network of(String key) {
        for (Network n : values()) {
            if (n.key.equals(key.toLowerCase(Locale.ROOT))) {
                return n;
            }
        }
        throw new IllegalArgumentException(
                "Unknown network '"
                        + key
                        + "'; use resnet18, resnet50, resnet50-224, transformer,"
                        + " transformer-256, d2l-cnn or d2l-resnet18");
    }
}
