package io.github.djlamp.amp.distributed;

import ai.djl.Model;
import ai.djl.training.Trainer;
import ai.djl.util.Utils;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.train.AmpSession;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Saves a model so that no reader ever sees half a checkpoint: {@code Model.save} writes into a
 * temporary directory next to the target, the file is flushed to disk, and only then renamed into
 * the target directory with {@code ATOMIC_MOVE}. A process killed, a job aborted or a disk filled
 * while saving leaves the checkpoints already there as they were, and {@code Model.load(directory,
 * name)} keeps finding the newest complete one. DJL's {@code Model.save} writes the {@code .params}
 * file in place, so a crash in the middle leaves a truncated newest file that {@code Model.load}
 * then picks and fails on.
 *
 * <p>The file and its name are exactly what {@code Model.save(directory, name)} writes (epoch
 * number from the model's {@code Epoch} property, or one past the newest in the directory), with
 * every model property in it, djl-amp's loss scaler state included.
 */
public final class AtomicCheckpoint {

    /** The prefix of the temporary directories, inside the target directory. */
    static final String PARTIAL_PREFIX = ".djl-amp-partial-";

    private static final String EPOCH_PROPERTY = "Epoch";
    private static final Logger logger = LoggerFactory.getLogger(AtomicCheckpoint.class);

    private AtomicCheckpoint() {}

    /**
     * Saves the model into {@code directory} as {@code Model.save(directory, name)} would, but
     * atomically; removes what earlier interrupted saves of this name left behind.
     *
     * @param model the model, trained or loaded
     * @param directory the checkpoint directory (created if missing)
     * @param name the checkpoint's name (the model's name when null or empty)
     * @return the checkpoint file written
     * @throws IOException when saving fails; the directory then holds what it held before
     */
    public static Path save(Model model, Path directory, String name) throws IOException {
        return save(model, null, directory, name);
    }

    /**
     * Saves the trainer's model as {@link #save(Model, Path, String)} does, and its optimizer's
     * state beside it ({@code name-NNNN.optimizer}, the same epoch number; {@code
     * AmpSession.saveOptimizerState}), written into the same temporary directory first. A trainer
     * whose optimizer djl-amp does not save (not DJL's Sgd, Adam or AdamW) gets the weights alone,
     * with a warning. Resume with {@code model.load}, then {@link
     * DataParallel#loadOptimizerState(Trainer, World, Path)} with {@link #optimizerStateFile}.
     *
     * @param trainer the trainer, configured with {@code Amp.configure}
     * @param directory the checkpoint directory (created if missing)
     * @param name the checkpoint's name (the model's name when null or empty)
     * @return the checkpoint's weights file written
     * @throws IOException when saving fails; the directory then holds what it held before
     */
    public static Path save(Trainer trainer, Path directory, String name) throws IOException {
        return save(trainer.getModel(), trainer, directory, name);
    }

    /**
     * Returns where {@link #save(Trainer, Path, String)} writes the optimizer state of a
     * checkpoint.
     *
     * @param directory the checkpoint directory
     * @param name the checkpoint's name
     * @param epoch the checkpoint's epoch number (the loaded model's {@code Epoch} property)
     * @return the file
     */
    public static Path optimizerStateFile(Path directory, String name, int epoch) {
        return directory.resolve(String.format(Locale.ROOT, "%s-%04d.optimizer", name, epoch));
    }

    private static Path save(Model model, Trainer trainer, Path directory, String name)
            throws IOException {
        String checkpointName = name == null || name.isEmpty() ? model.getName() : name;
        Files.createDirectories(directory);
        removeLeftovers(directory, checkpointName);
        String epochValue = model.getProperty(EPOCH_PROPERTY);
        int epoch =
                epochValue == null
                        ? Utils.getCurrentEpoch(directory, checkpointName) + 1
                        : Integer.parseInt(epochValue);
        Path partial =
                Files.createDirectory(
                        directory.resolve(
                                PARTIAL_PREFIX + checkpointName + "-" + UUID.randomUUID()));
        try {
            if (trainer != null) {
                saveOptimizerState(trainer, optimizerStateFile(partial, checkpointName, epoch));
            }
            model.save(partial, checkpointName);
            Pattern parameters = paramsFile(checkpointName);
            Path target = null;
            for (Path written : list(partial)) {
                String fileName = written.getFileName().toString();
                // without an Epoch property, save numbered it from the empty temporary directory
                Path destination =
                        directory.resolve(
                                parameters.matcher(fileName).matches()
                                        ? paramsFileName(checkpointName, epoch)
                                        : fileName);
                sync(written, false);
                move(written, destination);
                if (parameters.matcher(fileName).matches()) {
                    target = destination;
                }
            }
            sync(directory, true);
            if (target == null) {
                throw new IOException(
                        "Model.save wrote no " + paramsFileName(checkpointName, epoch));
            }
            return target;
        } finally {
            try {
                deleteRecursively(partial);
            } catch (IOException e) {
                // harmless: never read as a checkpoint, and the next save of this name removes it
                logger.warn("djl-amp: could not remove {}: {}", partial, e.toString());
            }
        }
    }

    private static void saveOptimizerState(Trainer trainer, Path file) throws IOException {
        try {
            AmpSession.of(trainer).saveOptimizerState(file);
        } catch (AmpException e) {
            logger.warn("djl-amp: the checkpoint holds the weights only: {}", e.getMessage());
        }
    }

    static String paramsFileName(String name, int epoch) {
        return String.format(Locale.ROOT, "%s-%04d.params", name, epoch);
    }

    private static Pattern paramsFile(String name) {
        return Pattern.compile(Pattern.quote(name) + "-\\d{4}\\.params");
    }

    private static void move(Path source, Path target) throws IOException {
        try {
            Files.move(
                    source,
                    target,
                    StandardCopyOption.ATOMIC_MOVE,
                    StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            throw new IOException(
                    "The file system of "
                            + target.getParent()
                            + " cannot rename atomically, so a checkpoint there could be left"
                            + " half written: save checkpoints on a local or POSIX file system",
                    e);
        }
    }

    /** Flushes a file's (or a directory's entries') data to the disk. */
    private static void sync(Path path, boolean directory) throws IOException {
        try (FileChannel channel =
                FileChannel.open(
                        path, directory ? StandardOpenOption.READ : StandardOpenOption.WRITE)) {
            channel.force(true);
        } catch (IOException e) {
            if (!directory) {
                throw e;
            }
            // some systems cannot open a directory for syncing: the rename is atomic regardless
        }
    }

    private static void removeLeftovers(Path directory, String name) throws IOException {
        String prefix = PARTIAL_PREFIX + name + "-";
        try (DirectoryStream<Path> entries =
                Files.newDirectoryStream(
                        directory,
                        path ->
                                Files.isDirectory(path)
                                        && path.getFileName().toString().startsWith(prefix))) {
            for (Path leftover : entries) {
                deleteRecursively(leftover);
            }
        }
    }

    private static List<Path> list(Path directory) throws IOException {
        List<Path> files = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(directory)) {
            for (Path entry : entries) {
                if (Files.isRegularFile(entry)) {
                    files.add(entry);
                }
            }
        }
        return files;
    }

    private static void deleteRecursively(Path path) throws IOException {
        if (Files.notExists(path)) {
            return;
        }
        try (Stream<Path> tree = Files.walk(path)) {
            for (Path entry : tree.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(entry);
            }
        }
    }
}
