package io.github.djlamp.bench.train;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import java.util.Locale;

/** The networks benchmarked: DJL's model-zoo ResNetV1 on 32x32 images with 10 classes. */
public enum Network {
    /** ResNetV1 with 18 layers on 1x32x32 images. */
    RESNET18("resnet18", 18, new Shape(1, 32, 32)),
    /** ResNetV1 with 50 layers on 3x32x32 images. */
    RESNET50("resnet50", 50, new Shape(3, 32, 32)),
    /** ResNetV1 with 50 layers on 3x224x224 images (ImageNet's size; the GPU benchmark). */
    RESNET50_224("resnet50-224", 50, new Shape(3, 224, 224));

    /** The number of classes of every network. */
    public static final int CLASSES = 10;

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
        return "ResNetV1-"
                + layers
                + ", "
                + imageShape.get(0)
                + "x"
                + imageShape.get(1)
                + "x"
                + imageShape.get(2);
    }

    /**
     * Builds a fresh, uninitialized block.
     *
     * @return the network
     */
    public Block build() {
        return ResNetV1.builder()
                .setImageShape(imageShape)
                .setNumLayers(layers)
                .setOutSize(CLASSES)
                .build();
    }

    /**
     * Returns the shape of a batch of input images.
     *
     * @param batchSize the batch size
     * @return (batch, channels, height, width)
     */
    public Shape inputShape(int batchSize) {
        return new Shape(batchSize, imageShape.get(0), imageShape.get(1), imageShape.get(2));
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
                "Unknown network '" + key + "'; use resnet18, resnet50 or resnet50-224");
    }
}
