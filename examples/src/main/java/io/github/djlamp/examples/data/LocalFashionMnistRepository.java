package io.github.djlamp.examples.data;

import ai.djl.repository.Repository;
import ai.djl.util.JsonUtils;
import java.io.EOFException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipException;

/**
 * A DJL {@code LocalRepository} whose only resource is Fashion-MNIST, pointing at a folder of the
 * four gzip IDX files.
 *
 * <p>The tree is {@code ROOT/dataset/cv/ai/djl/basicdataset/fashmnist/metadata.json}: the group and
 * artifact id that DJL's {@code FashionMnist} asks for, one artifact of version 1.0, and four file
 * items with absolute {@code file:} URIs (DJL 0.35.1 resolves relative ones against two different
 * folders). DJL copies and gunzips the files into its cache on {@code prepare}, with its usual
 * download code, checking each file's SHA-1.
 *
 * <p>Before it first writes the metadata for some content, it checks every file cheaply (IDX
 * header, gzip trailer, label values; see {@link #checkFolder(Path)}): DJL checks neither that a
 * file holds as many records as its header says nor that labels are 0-9, and a short image file
 * otherwise fails deep inside DJL ("The NDArray size is ..., but buffer size is ...") or, if the
 * labels are the short ones, trains on misaligned pairs.
 *
 * <p>One difference from DJL's own metadata: DJL's cache folder is keyed by group, artifact,
 * version and artifact <em>name</em> only, not by repository, so every Fashion-MNIST source would
 * share one cache entry and the first one prepared would win. The artifact name therefore carries a
 * tag made from the files' SHA-1s ({@code fashmnist-0123456789ab}): the shipped subset, the full
 * set and DJL's online copy each get their own cache entry, and the same content shares one.
 */
public final class LocalFashionMnistRepository {

    /** Path of the metadata folder under the repository root. */
    public static final String METADATA_DIR = "dataset/cv/ai/djl/basicdataset/fashmnist";

    private final Path root;
    private final Path dataDir;
    private final String artifactName;

    private LocalFashionMnistRepository(Path root, Path dataDir, String artifactName) {
        this.root = root;
        this.dataDir = dataDir;
        this.artifactName = artifactName;
    }

    /**
     * Writes (or reuses) a repository for a data folder under {@code workDir/repository/}, in a
     * folder named after the content and the data folder.
     *
     * @param dataDir a folder holding the four Fashion-MNIST files
     * @param workDir a writable folder for the repository tree
     * @return the repository
     * @throws FileNotFoundException if the folder lacks one of the files
     * @throws IOException if a file is not a valid IDX file or cannot be read or written
     */
    public static LocalFashionMnistRepository create(Path dataDir, Path workDir)
            throws IOException {
        Path dir = dataDir.toAbsolutePath().normalize();
        checkPresent(dir);
        Map<FashionMnistFile, String> sha1 = new LinkedHashMap<>();
        StringBuilder all = new StringBuilder();
        for (FashionMnistFile file : FashionMnistFile.values()) {
            String hash = sha1(file.in(dir));
            sha1.put(file, hash);
            all.append(hash);
        }
        String tag = sha1(all.toString().getBytes(StandardCharsets.US_ASCII)).substring(0, 12);
        String folder = sha1(dir.toString().getBytes(StandardCharsets.UTF_8)).substring(0, 8);
        Path root =
                workDir.toAbsolutePath()
                        .normalize()
                        .resolve("repository")
                        .resolve(tag + "-" + folder);
        LocalFashionMnistRepository repo =
                new LocalFashionMnistRepository(root, dir, "fashmnist-" + tag);
        repo.writeMetadata(sha1);
        return repo;
    }

    /**
     * Checks a folder: the four files are there, are gzip IDX files with the right headers, the
     * uncompressed size in each gzip trailer is what the header declares, images and labels agree
     * in number, and labels are 0-9. Image files are not read through: a few milliseconds for the
     * full set.
     *
     * @param dataDir the folder
     * @throws FileNotFoundException if the folder or a file is missing; the message names them
     * @throws IOException if a file is damaged; the message names it and says how to replace it
     */
    public static void checkFolder(Path dataDir) throws IOException {
        checkPresent(dataDir);
        checkPair(dataDir, FashionMnistFile.TRAIN_IMAGES, FashionMnistFile.TRAIN_LABELS);
        checkPair(dataDir, FashionMnistFile.TEST_IMAGES, FashionMnistFile.TEST_LABELS);
    }

    private static void checkPresent(Path dataDir) throws FileNotFoundException {
        List<String> missing = new ArrayList<>();
        for (FashionMnistFile file : FashionMnistFile.values()) {
            if (!Files.isRegularFile(file.in(dataDir))) {
                missing.add(file.fileName());
            }
        }
        if (!missing.isEmpty()) {
            throw new FileNotFoundException(
                    "Fashion-MNIST folder "
                            + dataDir.toAbsolutePath()
                            + (Files.isDirectory(dataDir) ? "" : " (does not exist)")
                            + " lacks "
                            + String.join(", ", missing)
                            + "; it must hold the four gzip IDX files "
                            + expectedNames());
        }
    }

    /**
     * Returns the four file names a data folder must hold.
     *
     * @return the names, comma separated
     */
    public static String expectedNames() {
        List<String> names = new ArrayList<>();
        for (FashionMnistFile file : FashionMnistFile.values()) {
            names.add(file.fileName());
        }
        return String.join(", ", names);
    }

    /**
     * Returns the DJL repository to pass to {@code FashionMnist.Builder.optRepository}.
     *
     * @return a new {@code LocalRepository} on {@link #root()}
     */
    public Repository repository() {
        return Repository.newInstance("local", root);
    }

    /**
     * Returns the repository root.
     *
     * @return the absolute root folder
     */
    public Path root() {
        return root;
    }

    /**
     * Returns the metadata file DJL reads.
     *
     * @return {@code ROOT/dataset/cv/ai/djl/basicdataset/fashmnist/metadata.json}
     */
    public Path metadataFile() {
        return root.resolve(METADATA_DIR).resolve("metadata.json");
    }

    /**
     * Returns the folder of gzip files the metadata points at.
     *
     * @return the absolute data folder
     */
    public Path dataDir() {
        return dataDir;
    }

    /**
     * Returns the artifact name, which also names DJL's cache folder for this data.
     *
     * @return {@code fashmnist-} and a tag of the files' content
     */
    public String artifactName() {
        return artifactName;
    }

    private void writeMetadata(Map<FashionMnistFile, String> sha1) throws IOException {
        Map<String, Object> files = new LinkedHashMap<>();
        for (FashionMnistFile file : FashionMnistFile.values()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("uri", file.in(dataDir).toUri().toString());
            item.put("name", file.baseName());
            item.put("sha1Hash", sha1.get(file));
            item.put("size", Files.size(file.in(dataDir)));
            files.put(file.itemKey(), item);
        }
        Map<String, Object> artifact = new LinkedHashMap<>();
        artifact.put("version", "1.0");
        artifact.put("snapshot", false);
        artifact.put("name", artifactName);
        artifact.put("files", files);
        Map<String, Object> metadata = new LinkedHashMap<>();
        metadata.put("metadataVersion", "0.2");
        metadata.put("resourceType", "dataset");
        metadata.put("application", "cv");
        metadata.put("groupId", "ai.djl.basicdataset");
        metadata.put("artifactId", "fashmnist");
        metadata.put("name", "Fashion-MNIST");
        metadata.put("description", "Fashion-MNIST read from " + dataDir);
        metadata.put("artifacts", List.of(artifact));
        byte[] json = JsonUtils.GSON_PRETTY.toJson(metadata).getBytes(StandardCharsets.UTF_8);

        Path target = metadataFile();
        if (Files.isRegularFile(target) && Arrays.equals(Files.readAllBytes(target), json)) {
            return; // same content, already checked when this was written
        }
        checkFolder(dataDir);
        Files.createDirectories(target.getParent());
        Path tmp = Files.createTempFile(target.getParent(), "metadata", ".tmp");
        try {
            Files.write(tmp, json);
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static void checkPair(Path dir, FashionMnistFile images, FashionMnistFile labels)
            throws IOException {
        int imageCount = checkFile(dir, images);
        int labelCount = checkFile(dir, labels);
        if (imageCount != labelCount) {
            throw new IOException(
                    dir + ": " + imageCount + " images but " + labelCount + " labels");
        }
    }

    /**
     * Checks a file cheaply, without reading it through: its IDX header (from the first bytes
     * gunzipped) and the uncompressed size its gzip trailer records (the last 4 bytes, modulo
     * 2^32), which must be the header plus the records it declares. A file cut short or holding
     * records missing from its header fails here; label files, small, are also read for values
     * outside 0-9. Returns the record count.
     */
    private static int checkFile(Path dir, FashionMnistFile file) throws IOException {
        Path path = file.in(dir);
        int count;
        try (InputStream in = new GZIPInputStream(Files.newInputStream(path))) {
            count = file.readHeader(in);
            if (!file.isImages()) {
                checkLabels(path, in.readAllBytes());
            }
        } catch (ZipException | EOFException e) {
            throw damaged(path, "it is not a complete gzip file (" + e.getMessage() + ")");
        }
        long want = file.headerBytes() + (long) count * file.recordBytes();
        long recorded = gzipTrailerSize(path);
        if (recorded != (want & 0xffffffffL)) {
            throw damaged(
                    path,
                    String.format(
                            "its header declares %d records (%d bytes uncompressed) but its gzip"
                                    + " trailer records %d bytes",
                            count, want, recorded));
        }
        return count;
    }

    private static void checkLabels(Path path, byte[] labels) throws IOException {
        for (int i = 0; i < labels.length; i++) {
            if ((labels[i] & 0xff) > 9) {
                throw damaged(path, "label " + (labels[i] & 0xff) + " at " + i);
            }
        }
    }

    /** The uncompressed size a gzip file's trailer records: its last 4 bytes, little-endian. */
    private static long gzipTrailerSize(Path path) throws IOException {
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
            if (channel.size() < 18) {
                throw damaged(path, "it is too short to be a gzip file");
            }
            ByteBuffer trailer = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
            channel.read(trailer, channel.size() - 4);
            return trailer.getInt(0) & 0xffffffffL;
        }
    }

    private static IOException damaged(Path path, String why) {
        return new IOException(
                path
                        + " is damaged: "
                        + why
                        + ". Replace it with an intact copy (the original Fashion-MNIST"
                        + " distribution), or point -D"
                        + FashionMnistData.DATA_DIR_PROPERTY
                        + "=DIR at a folder that holds one");
    }

    private static String sha1(Path file) throws IOException {
        MessageDigest digest = newSha1();
        byte[] buffer = new byte[1 << 16];
        try (InputStream in = Files.newInputStream(file)) {
            for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
                digest.update(buffer, 0, n);
            }
        }
        return hex(digest.digest());
    }

    private static String sha1(byte[] bytes) {
        return hex(newSha1().digest(bytes));
    }

    private static MessageDigest newSha1() {
        try {
            return MessageDigest.getInstance("SHA-1");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-1", e);
        }
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(String.format("%02x", b));
        }
        return sb.toString();
    }
}
