package io.github.djlamp.examples.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MakeSubsetTest {

    @TempDir Path work;

    /** The shipped subset, copied out of the classpath: the source for small subsets. */
    private Path shipped() throws IOException {
        return FashionMnistData.subset(work.resolve("shipped")).local().orElseThrow().dataDir();
    }

    @Test
    void writesValidHeadersAndTheSourcePrefix() throws IOException {
        Path source = shipped();
        Path target = work.resolve("small");
        MakeSubset.write(source, target, 300, 50);

        for (FashionMnistFile file : FashionMnistFile.values()) {
            int count = file.name().startsWith("TRAIN") ? 300 : 50;
            byte[] out = Idx.read(file.in(target));
            byte[] in = Idx.read(file.in(source));
            int headerInts = file.isImages() ? 4 : 2;
            int[] header = Idx.header(out, headerInts);
            int[] want =
                    file.isImages() ? new int[] {2051, count, 28, 28} : new int[] {2049, count};
            assertArrayEquals(want, header, file.fileName());
            int body = count * file.recordBytes();
            assertEquals(file.headerBytes() + body, out.length, file.fileName());
            assertArrayEquals(
                    Arrays.copyOfRange(in, file.headerBytes(), file.headerBytes() + body),
                    Arrays.copyOfRange(out, file.headerBytes(), out.length),
                    file.fileName());
        }
    }

    @Test
    void refusesMoreRecordsThanTheSourceHolds() throws IOException {
        Path source = shipped();
        IOException e =
                assertThrows(
                        IOException.class,
                        () -> MakeSubset.write(source, work.resolve("too-big"), 6001, 10));
        assertTrue(e.getMessage().contains("6000"), e.getMessage());
    }

    @Test
    void reproducesTheShippedSubsetFromTheSharedCopy() throws IOException {
        Optional<Path> shared = FashionMnistData.findSharedCopy(Path.of("").toAbsolutePath());
        Assumptions.assumeTrue(shared.isPresent(), "no ../shared/data/fashion-mnist here");
        Path target = work.resolve("again");
        MakeSubset.write(shared.get(), target, 6000, 1000);
        Path source = shipped();
        for (FashionMnistFile file : FashionMnistFile.values()) {
            assertArrayEquals(
                    Files.readAllBytes(file.in(source)),
                    Files.readAllBytes(file.in(target)),
                    file.fileName() + " differs from the shipped one");
        }
        int[] train = Idx.classCounts(Idx.read(FashionMnistFile.TRAIN_LABELS.in(target)));
        int[] test = Idx.classCounts(Idx.read(FashionMnistFile.TEST_LABELS.in(target)));
        for (int c = 0; c < 10; c++) {
            assertTrue(train[c] >= 540 && train[c] <= 660, "train class " + c + ": " + train[c]);
            assertTrue(test[c] >= 70 && test[c] <= 130, "test class " + c + ": " + test[c]);
        }
    }
}
