package io.github.djlamp.examples.data;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.zip.Deflater;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;

/**
 * Writes the first N training and M test records of a Fashion-MNIST folder as a smaller folder of
 * the same four gzip IDX files (standard headers, original names). Records are copied byte for
 * byte; only the count in each header changes. The output is reproducible: the gzip header holds no
 * time stamp.
 *
 * <p>The subset shipped in {@code src/main/resources/fashion-mnist-subset} was made from the
 * project's shared copy with:
 *
 * <pre>
 * java -cp examples/target/classes io.github.djlamp.examples.data.MakeSubset \
 *     ../shared/data/fashion-mnist examples/src/main/resources/fashion-mnist-subset 6000 1000
 * </pre>
 */
public final class MakeSubset {

    private MakeSubset() {}

    /**
     * Command line entry point.
     *
     * @param args source folder, target folder, number of training records, number of test records
     * @throws IOException if a file cannot be read or written, or the source is too small
     */
    public static void main(String[] args) throws IOException {
        if (args.length != 4) {
            System.err.println("usage: MakeSubset SOURCE_DIR TARGET_DIR TRAIN_COUNT TEST_COUNT");
            System.exit(2);
        }
        Path source = Paths.get(args[0]);
        Path target = Paths.get(args[1]);
        write(source, target, Integer.parseInt(args[2]), Integer.parseInt(args[3]));
        for (FashionMnistFile file : FashionMnistFile.values()) {
            Path out = file.in(target);
            System.out.printf("%s  %,d bytes%n", out, Files.size(out));
        }
    }

    /**
     * Writes the subset.
     *
     * @param source a folder with the four Fashion-MNIST files
     * @param target the folder to write the four smaller files to (created if needed)
     * @param trainCount how many training records to keep, from the start
     * @param testCount how many test records to keep, from the start
     * @throws IOException if a file cannot be read or written, or the source is too small
     */
    public static void write(Path source, Path target, int trainCount, int testCount)
            throws IOException {
        Files.createDirectories(target);
        for (FashionMnistFile file : FashionMnistFile.values()) {
            int count =
                    file == FashionMnistFile.TRAIN_IMAGES || file == FashionMnistFile.TRAIN_LABELS
                            ? trainCount
                            : testCount;
            copyPrefix(file, file.in(source), file.in(target), count);
        }
    }

    private static void copyPrefix(FashionMnistFile file, Path from, Path to, int count)
            throws IOException {
        Path tmp = Files.createTempFile(to.getParent(), file.baseName(), ".tmp");
        try {
            try (InputStream in = new GZIPInputStream(new BufferedInputStream(open(from)));
                    OutputStream out = new BestGzip(Files.newOutputStream(tmp))) {
                int available = file.readHeader(in);
                if (count < 0 || count > available) {
                    throw new IOException(
                            from + " holds " + available + " records; asked for " + count);
                }
                DataOutputStream header = new DataOutputStream(out);
                header.writeInt(file.magic());
                header.writeInt(count);
                if (file.isImages()) {
                    header.writeInt(FashionMnistFile.SIDE);
                    header.writeInt(FashionMnistFile.SIDE);
                }
                byte[] body = in.readNBytes(Math.multiplyExact(count, file.recordBytes()));
                if (body.length != count * file.recordBytes()) {
                    throw new EOFException(from + " ends before record " + count);
                }
                out.write(body);
            }
            Files.move(tmp, to, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static InputStream open(Path file) throws IOException {
        if (!Files.isRegularFile(file)) {
            throw new java.io.FileNotFoundException("missing " + file);
        }
        return Files.newInputStream(file);
    }

    /** A gzip stream at the highest compression level. */
    private static final class BestGzip extends GZIPOutputStream {
        BestGzip(OutputStream out) throws IOException {
            super(new BufferedOutputStream(out), 1 << 16);
            def.setLevel(Deflater.BEST_COMPRESSION);
        }
    }
}
