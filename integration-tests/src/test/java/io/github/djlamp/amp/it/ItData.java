package io.github.djlamp.amp.it;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.engine.Engine;
import ai.djl.modality.cv.transform.ToTensor;
import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.Dataset;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Optional;

/**
 * Real Fashion-MNIST for the integration tests, images as 1x28x28 floats in [0, 1].
 *
 * <p>The source is the project's full copy ({@code ../shared/data/fashion-mnist}, or the folder in
 * {@code -Ddjlamp.data.dir}), read as it is through DJL's own loader; {@code
 * FashionMnistData.fromFolder} checks its files (IDX headers, gzip trailers) first and names a
 * damaged one. Without a local copy (a clone outside this project's folder layout), DJL's own
 * Fashion-MNIST, downloaded into DJL's cache as {@code FashionMnist.builder()} does, like the demo;
 * the build's {@code ai.djl.offline=true} is there for the engine's natives and does not stop that
 * download, {@code DJL_OFFLINE=true} in the environment does. Where neither works the tests fail
 * with what to do. Tests take a prefix of a split with DJL's {@code optLimit}.
 */
final class ItData {

    private static final Path WORK_DIR = Path.of("target", "it-work").toAbsolutePath();

    /** The environment variable that keeps DJL from downloading (the user's, not the build's). */
    static final String DJL_OFFLINE_ENV = "DJL_OFFLINE";

    private static FashionMnistData cached;

    private ItData() {}

    /** The full set; fails (never skips) when it is missing, damaged or cannot be downloaded. */
    static synchronized FashionMnistData source() throws IOException {
        if (cached == null) {
            cached =
                    find(
                            System.getProperty(FashionMnistData.DATA_DIR_PROPERTY),
                            Paths.get(System.getProperty("user.dir")),
                            Boolean.parseBoolean(System.getenv(DJL_OFFLINE_ENV)),
                            WORK_DIR);
        }
        return cached;
    }

    /**
     * The source: the folder in {@code property} (an error when it lacks the files), else the
     * shared copy under {@code start} or an ancestor, else DJL's repository unless {@code offline},
     * when the message says where to put the files.
     */
    static FashionMnistData find(String property, Path start, boolean offline, Path workDir)
            throws IOException {
        if (property != null && !property.isBlank()) {
            return FashionMnistData.fromFolder(Paths.get(property), workDir);
        }
        Optional<Path> shared = FashionMnistData.findSharedCopy(start);
        if (shared.isPresent()) {
            return FashionMnistData.fromFolder(shared.get(), workDir);
        }
        if (offline) {
            throw new FileNotFoundException(
                    "The integration tests train on the full Fashion-MNIST, and there is no local"
                            + " copy (no "
                            + FashionMnistData.SHARED_PATH
                            + " under "
                            + start.toAbsolutePath()
                            + " or an ancestor, no -D"
                            + FashionMnistData.DATA_DIR_PROPERTY
                            + ") while "
                            + DJL_OFFLINE_ENV
                            + "=true keeps DJL from downloading it. "
                            + WHAT_TO_DO);
        }
        return FashionMnistData.online();
    }

    private static final String WHAT_TO_DO =
            "Put the four files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,"
                    + " t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) in a folder and pass"
                    + " -D"
                    + FashionMnistData.DATA_DIR_PROPERTY
                    + "=DIR, or in "
                    + FashionMnistData.SHARED_PATH
                    + " beside the project (../shared/data/fashion-mnist), or run once online so"
                    + " that DJL downloads them into its cache.";

    /**
     * Prepares the first {@code limit} records of a split, shuffled for TRAIN (in the order of
     * DJL's random sampler, so seed the engine before each epoch for a reproducible order).
     */
    static FashionMnist prepare(Dataset.Usage usage, int batchSize, int limit, NDManager manager)
            throws IOException {
        FashionMnistData source = source();
        FashionMnist.Builder builder =
                source.builder(usage, batchSize, limit)
                        .optManager(manager)
                        .addTransform(new ToTensor());
        FashionMnist dataset =
                source.local().isPresent() ? source.prepare(builder) : download(source, builder);
        if (dataset.size() < limit) {
            throw new IllegalArgumentException(
                    usage
                            + " split of "
                            + source
                            + " holds "
                            + dataset.size()
                            + " records; the"
                            + " test asks for "
                            + limit);
        }
        return dataset;
    }

    /**
     * Prepares a split from DJL's repository. The build sets {@code ai.djl.offline=true} for the
     * engine (DJL 0.36.0 would otherwise fetch its PyTorch JNI library at run time); it is lifted
     * for this download only, once the engine is loaded, and put back.
     */
    static FashionMnist download(FashionMnistData source, FashionMnist.Builder builder)
            throws IOException {
        Engine.getInstance(); // the natives load under the build's setting, before it is lifted
        String before = System.getProperty(OFFLINE_PROPERTY);
        System.setProperty(OFFLINE_PROPERTY, "false");
        try {
            return source.prepare(builder);
        } catch (IOException e) {
            throw new IOException(
                    "The integration tests train on the full Fashion-MNIST; there is no local copy"
                            + " (no -D"
                            + FashionMnistData.DATA_DIR_PROPERTY
                            + ", no "
                            + FashionMnistData.SHARED_PATH
                            + " under the working directory or an ancestor), and downloading DJL's"
                            + " own copy failed ("
                            + rootMessage(e)
                            + "). "
                            + WHAT_TO_DO,
                    e);
        } finally {
            if (before == null) {
                System.clearProperty(OFFLINE_PROPERTY);
            } else {
                System.setProperty(OFFLINE_PROPERTY, before);
            }
        }
    }

    private static final String OFFLINE_PROPERTY = "ai.djl.offline";

    private static String rootMessage(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        return root.getClass().getSimpleName() + ": " + root.getMessage();
    }
}
