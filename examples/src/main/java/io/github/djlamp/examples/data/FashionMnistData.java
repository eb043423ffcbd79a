package io.github.djlamp.examples.data;

import ai.djl.basicdataset.BasicDatasets;
import ai.djl.basicdataset.cv.classification.FashionMnist;
import ai.djl.repository.Repository;
import ai.djl.training.dataset.Dataset;
import ai.djl.util.Utils;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the examples get Fashion-MNIST from, as DJL {@link FashionMnist} builders.
 *
 * <p>Three local sources, all read by DJL's own loader through a {@link
 * LocalFashionMnistRepository} (so DJL's download and cache code runs unchanged, just pointed at
 * local files), and DJL's online repository as a last resort:
 *
 * <ul>
 *   <li>{@link #subset(Path)}: 6,000 training and 1,000 test images shipped in this module, for the
 *       default offline demo;
 *   <li>{@link #fromFolder(Path, Path)}: any folder holding the four gzip IDX files;
 *   <li>{@link #find(Path, Path)}: the full set from a given folder, else the folder named by the
 *       system property {@value #DATA_DIR_PROPERTY}, else {@value #SHARED_PATH} under the working
 *       directory or one of its ancestors (the project's {@code ../shared/data}), else DJL's
 *       default repository unless DJL runs offline.
 * </ul>
 *
 * <pre>{@code
 * FashionMnistData data = FashionMnistData.subset(FashionMnistData.defaultWorkDir());
 * FashionMnist train = data.builder(Dataset.Usage.TRAIN, 64).optManager(manager).build();
 * train.prepare();
 * }</pre>
 */
public final class FashionMnistData {

    /** System property naming a folder with the four Fashion-MNIST files. */
    public static final String DATA_DIR_PROPERTY = "djlamp.data.dir";

    /** Where the project keeps the full set, relative to an ancestor of the working directory. */
    public static final String SHARED_PATH = "shared/data/fashion-mnist";

    /** Classpath folder of the shipped subset. */
    public static final String SUBSET_RESOURCE = "/fashion-mnist-subset/";

    /** Training images in the shipped subset. */
    public static final int SUBSET_TRAIN_SIZE = 6000;

    /** Test images in the shipped subset. */
    public static final int SUBSET_TEST_SIZE = 1000;

    private static final Logger logger = LoggerFactory.getLogger(FashionMnistData.class);

    private static final String HOW_TO =
            "Pass a folder holding "
                    + LocalFashionMnistRepository.expectedNames()
                    + " as an argument or with -D"
                    + DATA_DIR_PROPERTY
                    + "=DIR, or use the shipped subset (FashionMnistData.subset).";

    private final Repository repository;
    private final LocalFashionMnistRepository local;
    private final String description;
    private final List<String> searched;

    private FashionMnistData(
            Repository repository,
            LocalFashionMnistRepository local,
            String description,
            List<String> searched) {
        this.repository = repository;
        this.local = local;
        this.description = description;
        this.searched = Collections.unmodifiableList(new ArrayList<>(searched));
    }

    /**
     * Uses a folder holding the four gzip IDX files.
     *
     * @param dataDir the folder
     * @param workDir a writable folder for the repository metadata
     * @return the data source
     * @throws FileNotFoundException if the folder lacks a file; the message names the folder and
     *     the files
     * @throws IOException if a file is invalid or the metadata cannot be written
     */
    public static FashionMnistData fromFolder(Path dataDir, Path workDir) throws IOException {
        LocalFashionMnistRepository local = LocalFashionMnistRepository.create(dataDir, workDir);
        return new FashionMnistData(
                local.repository(), local, "folder " + local.dataDir(), List.of());
    }

    /**
     * Uses the subset shipped in this module (6,000 training, 1,000 test images), copied from the
     * classpath to {@code workDir/fashion-mnist-subset} because DJL reads files, not resources.
     *
     * @param workDir a writable folder for the copied files and the repository metadata
     * @return the data source
     * @throws IOException if the resources are missing or the files cannot be written
     */
    public static FashionMnistData subset(Path workDir) throws IOException {
        Path dir = workDir.resolve("fashion-mnist-subset");
        Files.createDirectories(dir);
        for (FashionMnistFile file : FashionMnistFile.values()) {
            extract(SUBSET_RESOURCE + file.fileName(), file.in(dir));
        }
        LocalFashionMnistRepository local = LocalFashionMnistRepository.create(dir, workDir);
        return new FashionMnistData(
                local.repository(), local, "shipped subset in " + local.dataDir(), List.of());
    }

    /**
     * Finds the full set: {@code dataDir} if given, else the folder in the system property {@value
     * #DATA_DIR_PROPERTY}, else {@value #SHARED_PATH} under the working directory or an ancestor,
     * else DJL's default (online) repository, which is logged. A folder that is given but lacks the
     * files, or whose files are damaged, is an error, not a reason to fall back.
     *
     * @param dataDir a folder with the four files, or null to search
     * @param workDir a writable folder for the repository metadata
     * @return the data source
     * @throws FileNotFoundException if nothing is found and DJL runs offline; the message lists
     *     where it looked and how to point at the data
     * @throws IOException if a file is invalid or the metadata cannot be written
     */
    public static FashionMnistData find(Path dataDir, Path workDir) throws IOException {
        return find(
                dataDir,
                workDir,
                Paths.get(System.getProperty("user.dir")),
                System.getProperty(DATA_DIR_PROPERTY),
                Utils.isOfflineMode());
    }

    static FashionMnistData find(
            Path dataDir, Path workDir, Path start, String property, boolean offline)
            throws IOException {
        if (dataDir != null) {
            return explicit(dataDir, workDir, "the folder given");
        }
        if (property != null && !property.isBlank()) {
            return explicit(Paths.get(property), workDir, "-D" + DATA_DIR_PROPERTY);
        }
        List<String> searched = new ArrayList<>();
        searched.add("-D" + DATA_DIR_PROPERTY + " (not set)");
        Optional<Path> shared = findSharedCopy(start, searched);
        if (shared.isPresent()) {
            return explicit(shared.get(), workDir, "the shared copy");
        }
        String where = String.join(", ", searched);
        if (offline) {
            throw new FileNotFoundException(
                    "No Fashion-MNIST found. Looked in: "
                            + where
                            + ". DJL runs offline (ai.djl.offline / DJL_OFFLINE), so its default"
                            + " repository was not tried. "
                            + HOW_TO);
        }
        logger.info(
                "No local Fashion-MNIST (looked in: {}); using DJL's default repository, which"
                        + " downloads it into {}",
                where,
                Utils.getCacheDir());
        return new FashionMnistData(
                BasicDatasets.REPOSITORY, null, "DJL's default repository", searched);
    }

    /**
     * Uses DJL's default (online) repository, as {@code FashionMnist.builder()} does.
     *
     * @return the data source
     */
    public static FashionMnistData online() {
        return new FashionMnistData(
                BasicDatasets.REPOSITORY, null, "DJL's default repository", List.of());
    }

    /**
     * Looks for {@value #SHARED_PATH} holding the four files under {@code start} and each of its
     * ancestors, nearest first.
     *
     * @param start the folder to start from, usually the working directory
     * @return the first such folder
     */
    public static Optional<Path> findSharedCopy(Path start) {
        return findSharedCopy(start, new ArrayList<>());
    }

    private static Optional<Path> findSharedCopy(Path start, List<String> searched) {
        for (Path p = start.toAbsolutePath().normalize(); p != null; p = p.getParent()) {
            Path candidate = p.resolve(SHARED_PATH);
            searched.add(candidate.toString());
            boolean complete =
                    Arrays.stream(FashionMnistFile.values())
                            .allMatch(f -> Files.isRegularFile(f.in(candidate)));
            if (complete) {
                return Optional.of(candidate);
            }
        }
        return Optional.empty();
    }

    /**
     * Returns a per-user folder under {@code java.io.tmpdir} for the subset copy and metadata.
     *
     * @return {@code TMP/djl-amp-USER}
     */
    public static Path defaultWorkDir() {
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
        return Paths.get(System.getProperty("java.io.tmpdir"), "djl-amp-" + user);
    }

    /**
     * Returns a builder reading from this source, with the usage and sampling set (shuffled for
     * training, in order otherwise). Callers may add options such as a manager or a pipeline.
     *
     * @param usage {@code TRAIN} or {@code TEST}
     * @param batchSize the batch size
     * @return the configured builder
     */
    public FashionMnist.Builder builder(Dataset.Usage usage, int batchSize) {
        return FashionMnist.builder()
                .optRepository(repository)
                .optUsage(usage)
                .setSampling(batchSize, usage == Dataset.Usage.TRAIN);
    }

    /**
     * Returns {@link #builder(Dataset.Usage, int)} limited to the first {@code limit} records.
     *
     * @param usage {@code TRAIN} or {@code TEST}
     * @param batchSize the batch size
     * @param limit the most records the dataset holds
     * @return the configured builder
     */
    public FashionMnist.Builder builder(Dataset.Usage usage, int batchSize, long limit) {
        return builder(usage, batchSize).optLimit(limit);
    }

    /**
     * Builds and prepares a dataset, saying where the data came from if that fails.
     *
     * @param builder a builder from {@link #builder(Dataset.Usage, int)}
     * @return the prepared dataset
     * @throws IOException if DJL cannot fetch or read the files; the message names this source
     */
    public FashionMnist prepare(FashionMnist.Builder builder) throws IOException {
        FashionMnist dataset = builder.build();
        try {
            dataset.prepare(null);
        } catch (IOException e) {
            String looked = searched.isEmpty() ? "" : " (no local copy in: " + searched + ")";
            throw new IOException(
                    "Could not read Fashion-MNIST from " + description + looked + ". " + HOW_TO, e);
        }
        return dataset;
    }

    /**
     * Returns the DJL repository the builders read from.
     *
     * @return the local repository, or DJL's default one
     */
    public Repository repository() {
        return repository;
    }

    /**
     * Returns the local repository, if this source is local.
     *
     * @return the local repository, or empty for DJL's default repository
     */
    public Optional<LocalFashionMnistRepository> local() {
        return Optional.ofNullable(local);
    }

    /**
     * Returns where the data comes from, for logs.
     *
     * @return a short description
     */
    @Override
    public String toString() {
        return "Fashion-MNIST from " + description;
    }

    private static FashionMnistData explicit(Path dir, Path workDir, String origin)
            throws IOException {
        try {
            return fromFolder(dir, workDir);
        } catch (FileNotFoundException e) {
            FileNotFoundException wrapped =
                    new FileNotFoundException(origin + ": " + e.getMessage() + ". " + HOW_TO);
            wrapped.initCause(e);
            throw wrapped;
        } catch (IOException e) {
            throw new IOException(origin + ": " + e.getMessage() + ". " + HOW_TO, e);
        }
    }

    private static void extract(String resource, Path target) throws IOException {
        byte[] bytes;
        try (InputStream in = FashionMnistData.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new FileNotFoundException("classpath resource " + resource + " is missing");
            }
            bytes = in.readAllBytes();
        }
        if (Files.isRegularFile(target)
                && Files.size(target) == bytes.length
                && Arrays.equals(Files.readAllBytes(target), bytes)) {
            return;
        }
        Path tmp =
                Files.createTempFile(target.getParent(), target.getFileName().toString(), ".tmp");
        try {
            Files.write(tmp, bytes);
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }
}
