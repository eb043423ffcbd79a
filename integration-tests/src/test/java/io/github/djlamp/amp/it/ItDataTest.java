package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.ndarray.NDManager;
import ai.djl.training.dataset.Dataset;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the integration tests' Fashion-MNIST comes from outside this project's folder layout (no
 * {@code ../shared/data/fashion-mnist}): DJL's own copy, or a failure that says what to do.
 */
class ItDataTest {

    @TempDir Path elsewhere;

    @Test
    void aMissingFolderInThePropertyIsNamed() {
        Path missing = elsewhere.resolve("no-such-folder");
        FileNotFoundException e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> ItData.find(missing.toString(), elsewhere, false, elsewhere));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("does not exist"), e.getMessage());
    }

    @Test
    void withoutALocalCopyDjlsOwnRepositoryIsTheSource() throws IOException {
        FashionMnistData source = ItData.find(null, elsewhere, false, elsewhere);
        assertFalse(source.local().isPresent(), "no local copy under " + elsewhere);
        assertTrue(source.toString().contains("DJL's default repository"), source.toString());
    }

    @Test
    void withoutALocalCopyAndWithDjlOfflineTheFailureSaysWhatToDo() {
        FileNotFoundException e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> ItData.find(null, elsewhere, true, elsewhere));
        for (String part :
                new String[] {
                    "no local copy",
                    "DJL_OFFLINE=true",
                    "-Ddjlamp.data.dir=DIR",
                    "../shared/data/fashion-mnist",
                    "t10k-labels-idx1-ubyte.gz"
                }) {
            assertTrue(e.getMessage().contains(part), e.getMessage());
        }
    }

    /**
     * The download itself: online it brings DJL's copy (the split holds the records asked for); on
     * a machine that cannot reach DJL's repository (this project's build machines) it fails with
     * the cause and what to do. Either way the build's {@code ai.djl.offline} is put back.
     */
    @Test
    void theDownloadBringsDjlsCopyOrFailsSayingWhatToDo() throws IOException {
        String offlineBefore = System.getProperty("ai.djl.offline");
        FashionMnistData source = ItData.find(null, elsewhere, false, elsewhere);
        try (NDManager manager = NDManager.newBaseManager()) {
            FashionMnist.Builder builder =
                    source.builder(Dataset.Usage.TEST, 10, 20).optManager(manager);
            try {
                FashionMnist dataset = ItData.download(source, builder);
                assertEquals(20, dataset.size(), "online: DJL's copy, limited to 20 records");
            } catch (IOException e) {
                for (String part :
                        new String[] {
                            "downloading DJL's own copy failed",
                            "-Ddjlamp.data.dir=DIR",
                            "run once online"
                        }) {
                    assertTrue(e.getMessage().contains(part), e.getMessage());
                }
            }
        }
        assertEquals(offlineBefore, System.getProperty("ai.djl.offline"), "the setting is back");
    }
}
