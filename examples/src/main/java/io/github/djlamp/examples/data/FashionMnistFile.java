package io.github.djlamp.examples.data;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;

/**
 * The four files of Fashion-MNIST, named as in the original distribution, with the item key that
 * DJL's {@code FashionMnist} looks up in its repository metadata.
 */
public enum FashionMnistFile {
    /** Training images: IDX magic 2051, dimensions N x 28 x 28. */
    TRAIN_IMAGES("train_data", "train-images-idx3-ubyte", true),
    /** Training labels: IDX magic 2049, dimension N. */
    TRAIN_LABELS("train_labels", "train-labels-idx1-ubyte", false),
    /** Test images. */
    TEST_IMAGES("test_data", "t10k-images-idx3-ubyte", true),
    /** Test labels. */
    TEST_LABELS("test_labels", "t10k-labels-idx1-ubyte", false);

    /** IDX magic number of an unsigned-byte file with three dimensions (images). */
    public static final int IMAGE_MAGIC = 2051;

    /** IDX magic number of an unsigned-byte file with one dimension (labels). */
    public static final int LABEL_MAGIC = 2049;

    /** Image side in pixels. */
    public static final int SIDE = 28;

    private final String itemKey;
    private final String baseName;
    private final boolean images;

    FashionMnistFile(String itemKey, String baseName, boolean images) {
        this.itemKey = itemKey;
        this.baseName = baseName;
        this.images = images;
    }

    /**
     * Returns the key of this file in DJL's dataset metadata ({@code train_data}, ...).
     *
     * @return the item key
     */
    public String itemKey() {
        return itemKey;
    }

    /**
     * Returns the uncompressed file name, which DJL uses for its cached copy.
     *
     * @return the name without {@code .gz}
     */
    public String baseName() {
        return baseName;
    }

    /**
     * Returns the gzip file name as distributed.
     *
     * @return the name with {@code .gz}
     */
    public String fileName() {
        return baseName + ".gz";
    }

    /**
     * Returns the file inside a folder.
     *
     * @param folder a folder holding the four files
     * @return the path of this file in it
     */
    public Path in(Path folder) {
        return folder.resolve(fileName());
    }

    /**
     * Returns whether this file holds images (else labels).
     *
     * @return true for the image files
     */
    public boolean isImages() {
        return images;
    }

    /**
     * Returns the IDX magic number this file must start with.
     *
     * @return 2051 for images, 2049 for labels
     */
    public int magic() {
        return images ? IMAGE_MAGIC : LABEL_MAGIC;
    }

    /**
     * Returns the header length in bytes.
     *
     * @return 16 for images, 8 for labels
     */
    public int headerBytes() {
        return images ? 16 : 8;
    }

    /**
     * Returns the bytes of one record after the header.
     *
     * @return 784 for images, 1 for labels
     */
    public int recordBytes() {
        return images ? SIDE * SIDE : 1;
    }

    /**
     * Reads and checks this file's IDX header from an uncompressed stream.
     *
     * @param in the uncompressed stream, positioned at the start; left just after the header
     * @return the number of records the header declares
     * @throws IOException if the stream fails or the header is not the one this file must have
     */
    public int readHeader(InputStream in) throws IOException {
        DataInputStream data = new DataInputStream(in);
        int magic = data.readInt();
        int count = data.readInt();
        if (magic != magic() || count < 0) {
            throw new IOException(
                    fileName() + ": IDX magic " + magic + ", count " + count + "; want " + magic());
        }
        if (images) {
            int rows = data.readInt();
            int cols = data.readInt();
            if (rows != SIDE || cols != SIDE) {
                throw new IOException(fileName() + ": images are " + rows + "x" + cols);
            }
        }
        return count;
    }
}
