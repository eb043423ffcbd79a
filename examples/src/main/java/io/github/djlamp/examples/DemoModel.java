package io.github.djlamp.examples;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;

/**
 * The models the demo trains, all DJL model-zoo {@link ResNetV1} networks.
 *
 * <p>{@code ResNetV1} picks its layout from the image height it is given: up to 28 pixels, the
 * CIFAR layouts of He et al. (3 stages of 16, 32 and 64 filters; 20 layers is ResNet-20); above,
 * the ImageNet layouts (4 stages; 18 and 50 layers), with a 3x3 stem for images of up to 32 pixels.
 * Neither layout depends on the image size beyond that choice (convolutions and a global average
 * pool), so each model here asks for the layout its name promises and then takes 28x28
 * Fashion-MNIST and 32x32 CIFAR-10 images alike.
 */
public enum DemoModel {
    /** ResNet-20, the CIFAR layout: 0.27 million parameters. */
    RESNET20("resnet20", 20, 28),
    /** ResNet-18, DJL's ImageNet layout with a 3x3 stem: 4 stages. */
    RESNET18("resnet18", 18, 32),
    /** ResNet-50, DJL's ImageNet layout with a 3x3 stem: 4 stages of bottleneck units. */
    RESNET50("resnet50", 50, 32);

    private final String cliName;
    private final int layers;
    private final int layoutHeight;

    DemoModel(String cliName, int layers, int layoutHeight) {
        this.cliName = cliName;
        this.layers = layers;
        this.layoutHeight = layoutHeight;
    }

    /**
     * Returns the name used on the command line.
     *
     * @return e.g. {@code resnet20}
     */
    public String cliName() {
        return cliName;
    }

    /**
     * Returns the number of layers.
     *
     * @return layers
     */
    public int layers() {
        return layers;
    }

    /**
     * Builds a new, uninitialized network for images of up to 32 pixels.
     *
     * @param channels the image channels (1 for Fashion-MNIST, 3 for CIFAR-10)
     * @param classes the number of classes
     * @return the block
     */
    public Block build(int channels, int classes) {
        return build(channels, classes, layoutHeight);
    }

    /**
     * Builds a new, uninitialized network for images of a given side. ResNet-20 keeps its CIFAR
     * layout at any size; ResNet-18 and ResNet-50 get DJL's ImageNet stem (7x7 convolution of
     * stride 2 and a max pool) above 32 pixels, as for ImageNet's 224x224, and the 3x3 stem below.
     *
     * @param channels the image channels (1 for Fashion-MNIST, 3 for CIFAR-10)
     * @param classes the number of classes
     * @param imageSize the image side in pixels
     * @return the block
     */
    public Block build(int channels, int classes, int imageSize) {
        int height = this == RESNET20 ? layoutHeight : Math.max(layoutHeight, imageSize);
        return ResNetV1.builder()
                .setImageShape(new Shape(channels, height, height))
                .setNumLayers(layers)
                .setOutSize(classes)
                .build();
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return cliName;
    }
}
