package io.github.djlamp.examples.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicdataset.BasicDatasets;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.dataset.Batch;
import ai.djl.training.dataset.Dataset.Usage;
import ai.djl.translate.TranslateException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FashionMnistDataTest {

    @TempDir Path work;

    private NDManager manager;

    @BeforeEach
    void openManager() {
        manager = NDManager.newBaseManager("PyTorch");
    }

    @AfterEach
    void closeManager() {
        manager.close();
    }

    private FashionMnist load(FashionMnistData data, Usage usage, int batchSize)
            throws IOException {
        return data.prepare(data.builder(usage, batchSize).optManager(manager));
    }

    /** Iterates the whole dataset; returns class counts and checks every batch's images. */
    private int[] scan(FashionMnist dataset, int batchSize) throws IOException, TranslateException {
        int[] counts = new int[10];
        for (Batch batch : dataset.getData(manager)) {
            try (batch) {
                NDArray images = batch.getData().singletonOrThrow();
                long n = images.getShape().get(0);
                assertTrue(n >= 1 && n <= batchSize);
                assertEquals(new Shape(n, 1, 28, 28), images.getShape());
                assertTrue(images.min().getFloat() >= 0f && images.max().getFloat() <= 1f);
                for (float label : batch.getLabels().singletonOrThrow().toFloatArray()) {
                    int c = (int) label;
                    assertTrue(c == label && c >= 0 && c <= 9, "label " + label);
                    counts[c]++;
                }
            }
        }
        return counts;
    }

    private static int[] idxCounts(Path dataDir, FashionMnistFile labels) throws IOException {
        return Idx.classCounts(Idx.read(labels.in(dataDir)));
    }

    @Test
    void shippedSubsetThroughDjl() throws Exception {
        FashionMnistData data = FashionMnistData.subset(work);
        Path dir = data.local().orElseThrow().dataDir();
        assertEquals(work.resolve("fashion-mnist-subset").toAbsolutePath(), dir);

        FashionMnist train = load(data, Usage.TRAIN, 500);
        assertEquals(6000, train.size());
        int[] trainCounts = scan(train, 500);
        assertArrayEquals(idxCounts(dir, FashionMnistFile.TRAIN_LABELS), trainCounts);
        for (int c = 0; c < 10; c++) {
            assertTrue(trainCounts[c] >= 500 && trainCounts[c] <= 700, "class " + c);
        }

        FashionMnist test = load(data, Usage.TEST, 100);
        assertEquals(1000, test.size());
        int[] testCounts = scan(test, 100);
        assertArrayEquals(idxCounts(dir, FashionMnistFile.TEST_LABELS), testCounts);
        for (int c = 0; c < 10; c++) {
            assertTrue(testCounts[c] >= 60 && testCounts[c] <= 140, "class " + c);
        }
    }

    @Test
    void testImagesArriveInFileOrderScaledToOne() throws Exception {
        FashionMnistData data = FashionMnistData.subset(work);
        Path dir = data.local().orElseThrow().dataDir();
        byte[] images = Idx.read(FashionMnistFile.TEST_IMAGES.in(dir));
        byte[] labels = Idx.read(FashionMnistFile.TEST_LABELS.in(dir));

        FashionMnist test = load(data, Usage.TEST, 4);
        try (Batch batch = test.getData(manager).iterator().next()) {
            float[] pixels = batch.getData().singletonOrThrow().toFloatArray();
            float[] got = batch.getLabels().singletonOrThrow().toFloatArray();
            assertEquals(4 * 784, pixels.length);
            for (int i = 0; i < pixels.length; i++) {
                assertEquals((images[16 + i] & 0xff) / 255f, pixels[i], 1e-6f, "pixel " + i);
            }
            for (int i = 0; i < 4; i++) {
                assertEquals(labels[8 + i], got[i]);
            }
        }
    }

    @Test
    void limitAndSamplingAreSetOnTheBuilder() throws Exception {
        FashionMnistData data = FashionMnistData.subset(work);
        FashionMnist limited = data.prepare(data.builder(Usage.TRAIN, 32, 100).optManager(manager));
        assertEquals(100, limited.size());
        int batches = 0;
        for (Batch batch : limited.getData(manager)) {
            try (batch) {
                batches++;
            }
        }
        assertEquals(4, batches);
    }

    /** The full shared set (all 70,000 records intact) through the same code as the subset. */
    @Test
    void fullSharedSetThroughTheSameCode() throws Exception {
        Optional<Path> shared = FashionMnistData.findSharedCopy(Path.of("").toAbsolutePath());
        Assumptions.assumeTrue(shared.isPresent(), "no ../shared/data/fashion-mnist here");
        FashionMnistData full = FashionMnistData.find(null, work);
        assertEquals(shared.get(), full.local().orElseThrow().dataDir());
        int trainSize = 60000;
        FashionMnistData subset = FashionMnistData.subset(work);
        assertNotEquals(
                subset.local().orElseThrow().artifactName(),
                full.local().orElseThrow().artifactName());

        // Subset first, then the bigger set: each must read its own files, not DJL's cache of
        // the other (DJL keys its cache by artifact, not by repository).
        assertEquals(6000, load(subset, Usage.TRAIN, 1000).size());
        FashionMnist train = load(full, Usage.TRAIN, 1000);
        assertEquals(trainSize, train.size());
        try (Batch batch = train.getData(manager).iterator().next()) {
            assertEquals(new Shape(1000, 1, 28, 28), batch.getData().singletonOrThrow().getShape());
        }
        FashionMnist test = load(full, Usage.TEST, 2000);
        assertEquals(10000, test.size());
        assertArrayEquals(idxCounts(shared.get(), FashionMnistFile.TEST_LABELS), scan(test, 2000));
    }

    @Test
    void explicitFolderLackingFilesSaysWhatIsMissing() throws IOException {
        Path empty = Files.createDirectories(work.resolve("empty"));
        FileNotFoundException e =
                assertThrows(FileNotFoundException.class, () -> FashionMnistData.find(empty, work));
        String message = e.getMessage();
        assertTrue(message.contains(empty.toAbsolutePath().toString()), message);
        assertTrue(message.contains("train-images-idx3-ubyte.gz"), message);
        assertTrue(message.contains("-Ddjlamp.data.dir"), message);

        e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> FashionMnistData.find(null, work, work, empty.toString(), true));
        assertTrue(e.getMessage().startsWith("-Ddjlamp.data.dir: "), e.getMessage());
    }

    @Test
    void nothingFoundOfflineListsWhereItLooked() {
        Path start = work.resolve("deep");
        FileNotFoundException e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> FashionMnistData.find(null, work, start, null, true));
        String message = e.getMessage();
        assertTrue(message.contains("djlamp.data.dir (not set)"), message);
        assertTrue(
                message.contains(start.resolve("shared/data/fashion-mnist").toString()), message);
        assertTrue(message.contains(work.resolve("shared/data/fashion-mnist").toString()), message);
        assertTrue(message.contains("offline"), message);
    }

    @Test
    void nothingFoundOnlineFallsBackToDjlsRepository() throws IOException {
        FashionMnistData data = FashionMnistData.find(null, work, work, null, false);
        assertSame(BasicDatasets.REPOSITORY, data.repository());
        assertTrue(data.local().isEmpty());
    }

    @Test
    void prepareFailureNamesTheSource() throws IOException {
        // Content unique to this run, so DJL's cache cannot already hold it.
        Path data = work.resolve("vanishing");
        Idx.writeRandom(data, 2, System.nanoTime());
        FashionMnistData source = FashionMnistData.fromFolder(data, work);
        Files.delete(FashionMnistFile.TRAIN_IMAGES.in(data));
        IOException e = assertThrows(IOException.class, () -> load(source, Usage.TRAIN, 2));
        assertTrue(e.getMessage().contains(data.toAbsolutePath().toString()), e.getMessage());
    }

    @Test
    void tinyRandomFolderLoadsItsOwnRecords() throws Exception {
        Path data = work.resolve("tiny");
        Idx.writeRandom(data, 5, 42); // fixed content: one small DJL cache entry across runs
        FashionMnist test = load(FashionMnistData.fromFolder(data, work), Usage.TEST, 5);
        assertEquals(5, test.size());
        assertArrayEquals(idxCounts(data, FashionMnistFile.TEST_LABELS), scan(test, 5));
    }
}
