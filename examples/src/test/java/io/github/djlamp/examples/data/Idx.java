package io.github.djlamp.examples.data;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;

/** Reads and writes gzip IDX files in tests, independently of the code under test. */
final class Idx {

    private Idx() {}

    /** Returns the whole uncompressed content. */
    static byte[] read(Path gz) throws IOException {
        try (InputStream in = new GZIPInputStream(Files.newInputStream(gz))) {
            return in.readAllBytes();
        }
    }

    /** Returns the first {@code n} big-endian ints. */
    static int[] header(byte[] raw, int n) {
        ByteBuffer buffer = ByteBuffer.wrap(raw);
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = buffer.getInt();
        }
        return out;
    }

    /** Returns per-class counts of a label file's uncompressed content. */
    static int[] classCounts(byte[] labels) {
        int[] counts = new int[10];
        for (int i = 8; i < labels.length; i++) {
            counts[labels[i]]++;
        }
        return counts;
    }

    /** Writes a tiny valid set of the four files with {@code n} random records per split. */
    static void writeRandom(Path dir, int n, long seed) throws IOException {
        java.util.Random random = new java.util.Random(seed);
        Files.createDirectories(dir);
        for (FashionMnistFile file : FashionMnistFile.values()) {
            ByteArrayOutputStream raw = new ByteArrayOutputStream();
            ByteBuffer head = ByteBuffer.allocate(file.headerBytes());
            head.putInt(file.magic()).putInt(n);
            if (file.isImages()) {
                head.putInt(28).putInt(28);
            }
            raw.write(head.array());
            for (int i = 0; i < n * file.recordBytes(); i++) {
                raw.write(file.isImages() ? random.nextInt(256) : random.nextInt(10));
            }
            try (OutputStream out = new GZIPOutputStream(Files.newOutputStream(file.in(dir)))) {
                out.write(raw.toByteArray());
            }
        }
    }

    /** Writes uncompressed content as a gzip file. */
    static void writeRaw(Path gz, byte[] raw) throws IOException {
        try (OutputStream out = new GZIPOutputStream(Files.newOutputStream(gz))) {
            out.write(raw);
        }
    }
}
