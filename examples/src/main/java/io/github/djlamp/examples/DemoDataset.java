package io.github.djlamp.examples;

import ai.djl.basicdataset.cv.classification.Cifar10;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.modality.cv.transform.Resize;
import ai.djl.modality.cv.transform.ToTensor;
import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.Dataset;
import ai.djl.training.util.ProgressBar;
import ai.djl.translate.Pipeline;
import ai.djl.util.Utils;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.IOException;
import java.nio.file.Path;

/** The datasets the demo trains on. */
public enum DemoDataset {
    /** The 6,000/1,000-image Fashion-MNIST subset shipped in this module: works offline. */
    FASHION_MNIST_SUBSET("fashion-mnist-subset"),
    /**
     * The full Fashion-MNIST (60,000/10,000): from {@code --data-dir}, the project's shared copy,
     * or DJL's repository when online.
     */
    FASHION_MNIST("fashion-mnist"),
    /** CIFAR-10 through DJL's {@link Cifar10} loader: needs the network. */
    CIFAR10("cifar10");

    private final String cliName;

    DemoDataset(String cliName) {
        this.cliName = cliName;
    }

    /**
     * Returns the name used on the command line.
     *
     * @return e.g. {@code fashion-mnist-subset}
     */
    public String cliName() {
        return cliName;
    }

    /**
     * Returns the side of the dataset's own images.
     *
     * @return 28 for Fashion-MNIST, 32 for CIFAR-10
     */
    public int imageSize() {
        return this == CIFAR10 ? Cifar10.IMAGE_HEIGHT : FashionMnist.IMAGE_HEIGHT;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return cliName;
    }

    /**
     * Loads and prepares the training and test sets.
     *
     * @param manager the manager the data lives on
     * @param batchSize the batch size
     * @param imageSize the image side to resize to (bilinear), or the dataset's own to keep them
     * @param trainLimit the most training images to use, or 0 for all
     * @param testLimit the most test images to use, or 0 for all
     * @param dataDir a folder holding the full Fashion-MNIST, or null to search for it
     * @param workDir a writable folder for copied files and repository metadata
     * @return the data
     * @throws IOException if the data cannot be found or read; the message says what to do
     * @throws IllegalArgumentException when {@code dataDir} is given for a dataset that has none
     */
    public DemoData load(
            NDManager manager,
            int batchSize,
            int imageSize,
            long trainLimit,
            long testLimit,
            Path dataDir,
            Path workDir)
            throws IOException {
        if (dataDir != null && this != FASHION_MNIST) {
            throw new IllegalArgumentException(
                    "--data-dir is read only with --dataset fashion-mnist (the subset is shipped,"
                            + " CIFAR-10 comes from DJL's repository)");
        }
        switch (this) {
            case FASHION_MNIST_SUBSET:
                return fashion(
                        FashionMnistData.subset(workDir),
                        manager,
                        batchSize,
                        pipeline(imageSize, FashionMnist.IMAGE_HEIGHT),
                        trainLimit,
                        testLimit);
            case FASHION_MNIST:
                return fashion(
                        FashionMnistData.find(dataDir, workDir),
                        manager,
                        batchSize,
                        pipeline(imageSize, FashionMnist.IMAGE_HEIGHT),
                        trainLimit,
                        testLimit);
            case CIFAR10:
                return cifar10(
                        manager,
                        batchSize,
                        pipeline(imageSize, Cifar10.IMAGE_HEIGHT),
                        trainLimit,
                        testLimit);
            default:
                throw new AssertionError(this);
        }
    }

    private static DemoData fashion(
            FashionMnistData source,
            NDManager manager,
            int batchSize,
            Pipeline pipeline,
            long trainLimit,
            long testLimit)
            throws IOException {
        FashionMnist.Builder train =
                source.builder(Dataset.Usage.TRAIN, batchSize)
                        .optManager(manager)
                        .optPipeline(pipeline);
        FashionMnist.Builder test =
                source.builder(Dataset.Usage.TEST, batchSize)
                        .optManager(manager)
                        .optPipeline(pipeline);
        if (trainLimit > 0) {
            train.optLimit(trainLimit);
        }
        if (testLimit > 0) {
            test.optLimit(testLimit);
        }
        return new DemoData(source.prepare(train), source.prepare(test), 1, 10, source.toString());
    }

    /**
     * The images' pipeline: DJL's default {@link ToTensor} (HWC bytes to CHW floats in [0, 1]),
     * after a bilinear {@link Resize} of each batch when the size differs from the dataset's.
     */
    static Pipeline pipeline(int imageSize, int nativeSize) {
        return imageSize == nativeSize
                ? new Pipeline(new ToTensor())
                : new Pipeline(new Resize(imageSize), new ToTensor());
    }

    private static DemoData cifar10(
            NDManager manager, int batchSize, Pipeline pipeline, long trainLimit, long testLimit)
            throws IOException {
        if (Utils.isOfflineMode()) {
            throw new IOException(
                    "CIFAR-10 comes from DJL's repository, which needs the network, and DJL runs"
                            + " offline (ai.djl.offline=true): run online with"
                            + " -Dai.djl.offline=false, or use --dataset fashion-mnist-subset");
        }
        Cifar10 train = cifar10(Dataset.Usage.TRAIN, manager, batchSize, pipeline, trainLimit);
        Cifar10 test = cifar10(Dataset.Usage.TEST, manager, batchSize, pipeline, testLimit);
        return new DemoData(train, test, 3, 10, "CIFAR-10 from DJL's repository");
    }

    private static Cifar10 cifar10(
            Dataset.Usage usage, NDManager manager, int batchSize, Pipeline pipeline, long limit)
            throws IOException {
        Cifar10.Builder builder =
                Cifar10.builder()
                        .optUsage(usage)
                        .optManager(manager)
                        .optPipeline(pipeline)
                        .setSampling(batchSize, usage == Dataset.Usage.TRAIN);
        if (limit > 0) {
            builder.optLimit(limit);
        }
        Cifar10 dataset = builder.build();
        dataset.prepare(new ProgressBar());
        return dataset;
    }
}
