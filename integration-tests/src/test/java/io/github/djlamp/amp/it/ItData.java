package io.github.djlamp.amp.it;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.modality.cv.transform.ToTensor;
import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.Dataset;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Real Fashion-MNIST for the integration tests, images as 1x28x28 floats in [0, 1].
 *
 * <p>The source is the project's full copy ({@code ../shared/data/fashion-mnist}, or the folder in
 * {@code -Ddjlamp.data.dir}), read as it is through DJL's own loader; {@code
 * FashionMnistData.fromFolder} checks its files (IDX headers, gzip trailers) first and names a
 * damaged one. Tests take a prefix of a split with DJL's {@code optLimit}.
 */
final class ItData {

    private static final Path WORK_DIR = Path.of("target", "it-work").toAbsolutePath();

    private static FashionMnistData cached;

    private ItData() {}

    /** The full set; fails (never skips) when it is missing or damaged. */
    static synchronized FashionMnistData source() throws IOException {
        if (cached == null) {
            cached = FashionMnistData.fromFolder(fullSet(), WORK_DIR);
        }
        return cached;
    }

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
        FashionMnist dataset = source.prepare(builder);
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

    private static Path fullSet() throws FileNotFoundException {
        String property = System.getProperty(FashionMnistData.DATA_DIR_PROPERTY);
        if (property != null && !property.isBlank()) {
            return Paths.get(property);
        }
        return FashionMnistData.findSharedCopy(Paths.get(System.getProperty("user.dir")))
                .orElseThrow(
                        () ->
                                new FileNotFoundException(
                                        "The integration tests train on the full Fashion-MNIST:"
                                                + " put it in ../shared/data/fashion-mnist (an"
                                                + " ancestor's "
                                                + FashionMnistData.SHARED_PATH
                                                + ") or pass -D"
                                                + FashionMnistData.DATA_DIR_PROPERTY
                                                + "=DIR"));
    }
}
