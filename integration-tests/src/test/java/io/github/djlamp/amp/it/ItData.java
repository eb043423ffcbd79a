package io.github.djlamp.amp.it;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.modality.cv.transform.ToTensor;
import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.Dataset;
import io.github.djlamp.examples.data.FashionMnistData;
import io.github.djlamp.examples.data.FashionMnistFile;
import io.github.djlamp.examples.data.MakeSubset;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Real Fashion-MNIST for the integration tests, images as 1x28x28 floats in [0, 1].
 *
 * <p>The source is the project's full copy ({@code ../shared/data/fashion-mnist}, or the folder in
 * {@code -Ddjlamp.data.dir}). Its training image file is damaged (59,999 images under a header
 * declaring 60,000, misaligned with the labels after record 57,995), so {@code
 * FashionMnistData.find} rejects it and DJL's loader, which always reads every record the labels
 * declare, could not read it anyway. The tests therefore read a prefix written once into {@code
 * target/} by the examples' {@link MakeSubset}: the first {@value #TRAIN_RECORDS} training records
 * (all before the damage) and all {@value #TEST_RECORDS} test records, byte for byte.
 */
final class ItData {

    /** Training records in the prefix: the most any test uses. */
    static final int TRAIN_RECORDS = 20_000;

    /** Test records in the prefix: the whole test split. */
    static final int TEST_RECORDS = 10_000;

    private static final Path WORK_DIR = Path.of("target", "it-work").toAbsolutePath();
    private static final Path PREFIX_DIR =
            WORK_DIR.resolve("fashion-mnist-" + TRAIN_RECORDS + "-" + TEST_RECORDS);

    private static FashionMnistData cached;

    private ItData() {}

    /** The prefix of the full set; fails (never skips) when the full set is missing. */
    static synchronized FashionMnistData source() throws IOException {
        if (cached == null) {
            if (!complete(PREFIX_DIR)) {
                Path full = fullSet();
                long start = System.nanoTime();
                MakeSubset.write(full, PREFIX_DIR, TRAIN_RECORDS, TEST_RECORDS);
                System.out.printf(
                        "wrote the first %d training and %d test records of %s to %s in %.1f s%n",
                        TRAIN_RECORDS,
                        TEST_RECORDS,
                        full,
                        PREFIX_DIR,
                        (System.nanoTime() - start) / 1e9);
            }
            cached = FashionMnistData.fromFolder(PREFIX_DIR, WORK_DIR);
        }
        return cached;
    }

    /**
     * Prepares the first {@code limit} records of a split, shuffled for TRAIN (in the order of
     * DJL's random sampler, so seed the engine before each epoch for a reproducible order).
     */
    static FashionMnist prepare(Dataset.Usage usage, int batchSize, int limit, NDManager manager)
            throws IOException {
        int available = usage == Dataset.Usage.TRAIN ? TRAIN_RECORDS : TEST_RECORDS;
        if (limit > available) {
            throw new IllegalArgumentException(
                    "limit " + limit + " > " + available + " records prepared for " + usage);
        }
        FashionMnistData source = source();
        FashionMnist.Builder builder =
                source.builder(usage, batchSize, limit)
                        .optManager(manager)
                        .addTransform(new ToTensor());
        return source.prepare(builder);
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

    private static boolean complete(Path dir) {
        for (FashionMnistFile file : FashionMnistFile.values()) {
            if (!Files.isRegularFile(file.in(dir))) {
                return false;
            }
        }
        return true;
    }
}
