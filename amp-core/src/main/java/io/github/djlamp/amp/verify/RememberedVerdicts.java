package io.github.djlamp.amp.verify;

import ai.djl.util.Utils;
import io.github.djlamp.amp.spi.AmpBackend;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The verdicts of djl-amp's checks kept on disk, so that a later JVM on the same machine with the
 * same libraries reuses them instead of checking again: each kernel's ({@link KernelVerifier}) and
 * amp-doctor's platform check's.
 *
 * <p>They live in {@code <DJL's cache>/djl-amp/verdicts/} (DJL's cache is {@code ~/.djl.ai} unless
 * {@code DJL_CACHE_DIR} moves it; {@value #DIRECTORY_PROPERTY} moves the verdicts alone), one file
 * per key. The key is what changes a verdict: djl-amp's check version, the machine ({@link
 * MachineDescription}: CPU model, microcode and flags, its cache topology, the GPU driver and
 * models) and the engine's kernel environment ({@link AmpBackend#kernelEnvironment()}: the engine's
 * version and the ISA cap in force). A file is read whole and strictly ({@link VerdictFile}): one
 * whose key is not the key recomputed here, or that does not parse, is ignored with a WARN and
 * replaced at the next write, never trusted.
 *
 * <p>The setting ({@link VerdictMemory}) and the folder are read from {@value
 * VerdictMemory#PROPERTY} and {@value #DIRECTORY_PROPERTY} once, at the first use; {@code
 * AmpOptions} may set them for the process when {@code Amp.configure} applies its options.
 */
public final class RememberedVerdicts {

    /** The system property naming the folder of the kept verdicts. */
    public static final String DIRECTORY_PROPERTY = "djlamp.verdictDir";

    /**
     * The kind of record of a platform verdict, two fields: {@value #PLATFORM_UNSOUND_CURABLE} or
     * another word, and what the platform check's cure re-run found.
     */
    public static final String PLATFORM_VERDICT = "platform-verdict";

    /** A platform verdict's first field where defects were found and the known cure mends them. */
    public static final String PLATFORM_UNSOUND_CURABLE = "unsound-curable";

    /** The kind of record of a kernel's verdict. */
    static final String KERNEL = "kernel";

    private static final Logger logger = LoggerFactory.getLogger(RememberedVerdicts.class);

    private static RememberedVerdicts current;

    private final VerdictMemory memory;
    private final Path directory;
    private final Map<Path, Map<String, List<String>>> loaded = new HashMap<>();
    private final Set<Path> unwritable = new HashSet<>();

    private RememberedVerdicts(VerdictMemory memory, Path directory) {
        this.memory = Objects.requireNonNull(memory);
        this.directory = Objects.requireNonNull(directory);
    }

    /**
     * Returns the process's kept verdicts: at the first call, as {@value VerdictMemory#PROPERTY}
     * and {@value #DIRECTORY_PROPERTY} say (read then, once), or as {@link #use} set them.
     *
     * @return the kept verdicts in use
     */
    public static synchronized RememberedVerdicts current() {
        if (current == null) {
            current = new RememberedVerdicts(propertyMemory(), propertyDirectory());
        }
        return current;
    }

    /**
     * Sets how this process keeps verdicts from now on. Switching to {@link VerdictMemory#RECHECK}
     * also forgets the verdicts this process reached or reused, so that each signature is checked
     * again.
     *
     * @param memory whether to reuse, recheck or neither
     * @param directory the folder of the files
     */
    public static void use(VerdictMemory memory, Path directory) {
        RememberedVerdicts before;
        synchronized (RememberedVerdicts.class) {
            before = current;
            if (before != null && before.memory == memory && before.directory.equals(directory)) {
                return;
            }
            current = new RememberedVerdicts(memory, directory);
        }
        if (memory == VerdictMemory.RECHECK
                && (before == null || before.memory != VerdictMemory.RECHECK)) {
            KernelVerdicts.forgetAll();
        }
    }

    /**
     * Returns the setting that {@value VerdictMemory#PROPERTY} gives, remember when it is not set.
     *
     * @return the setting
     * @throws IllegalArgumentException when the property is none of remember, recheck and off
     */
    public static VerdictMemory propertyMemory() {
        String value = System.getProperty(VerdictMemory.PROPERTY);
        return value == null ? VerdictMemory.REMEMBER : VerdictMemory.parse(value);
    }

    /**
     * Returns the folder that {@value #DIRECTORY_PROPERTY} names, else {@code djl-amp/verdicts} in
     * DJL's cache folder.
     *
     * @return the folder
     */
    public static Path propertyDirectory() {
        String value = System.getProperty(DIRECTORY_PROPERTY);
        return value != null
                ? Paths.get(value)
                : Utils.getCacheDir().resolve("djl-amp").resolve("verdicts");
    }

    /**
     * Returns whether verdicts are reused or rechecked.
     *
     * @return the setting
     */
    public VerdictMemory getMemory() {
        return memory;
    }

    /**
     * Returns the folder of the files.
     *
     * @return the folder
     */
    public Path getDirectory() {
        return directory;
    }

    /**
     * Returns the key of the verdicts reached through {@code backend} on this machine.
     *
     * @param backend the engine layer whose kernels are judged
     * @return the key, one line per fact
     */
    public static String keyFor(AmpBackend backend) {
        return "djl-amp check "
                + KernelVerifier.CHECK_VERSION
                + "\n"
                + MachineDescription.current()
                + "\nengine "
                + backend.kernelEnvironment();
    }

    /**
     * Returns the file holding the verdicts of {@code key}.
     *
     * @param key a key from {@link #keyFor}
     * @return the file, which may not exist
     */
    public Path fileFor(String key) {
        return directory.resolve(sha256(key).substring(0, 32) + ".verdicts");
    }

    /**
     * Returns a kept verdict's fields, or null when none is kept for it, or when this memory does
     * not reuse verdicts.
     *
     * @param key the key, from {@link #keyFor}
     * @param kind the kind of verdict, a word
     * @param signature what was judged
     * @return the fields written with {@link #remember}, or null
     */
    public synchronized List<String> recall(String key, String kind, String signature) {
        if (memory != VerdictMemory.REMEMBER) {
            return null;
        }
        return records(key).get(VerdictFile.recordId(kind, signature));
    }

    /**
     * Returns whether a verdict kept under {@code key} says the platform is unsound where a cure in
     * the engine's environment is known: a kernel check that found fp32 itself wrong, or a platform
     * check whose defects its cure mended ({@value #PLATFORM_VERDICT} records). False when this
     * memory does not reuse verdicts.
     *
     * @param key the key, from {@link #keyFor}
     * @return true when such a verdict is kept
     */
    public synchronized boolean keptPlatformUnsound(String key) {
        if (memory != VerdictMemory.REMEMBER) {
            return false;
        }
        for (Map.Entry<String, List<String>> record : records(key).entrySet()) {
            String kind = record.getKey().substring(0, record.getKey().indexOf('\t'));
            List<String> fields = record.getValue();
            if (kind.equals(KERNEL)
                    && fields.size() > 5
                    && fields.get(5).equals(KernelVerdict.Outcome.PLATFORM_UNSOUND.name())) {
                return true;
            }
            if (kind.equals(PLATFORM_VERDICT)
                    && fields.size() == 2
                    && fields.get(0).equals(PLATFORM_UNSOUND_CURABLE)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Keeps a verdict's fields, replacing one kept for the same signature; does nothing when this
     * memory is off. A file that cannot be written is said once, in a WARN.
     *
     * @param key the key, from {@link #keyFor}
     * @param kind the kind of verdict, a word
     * @param signature what was judged
     * @param fields what to keep
     */
    public synchronized void remember(
            String key, String kind, String signature, List<String> fields) {
        if (memory == VerdictMemory.OFF) {
            return;
        }
        if (!kind.matches("[a-z-]+")) {
            throw new IllegalArgumentException("a verdict's kind is a word, got '" + kind + "'");
        }
        Path file = fileFor(key);
        Map<String, List<String>> records = new LinkedHashMap<>(records(key));
        // another JVM may have kept verdicts since this one read the file
        records.putAll(readQuietly(file, key));
        records.put(VerdictFile.recordId(kind, signature), new ArrayList<>(fields));
        loaded.put(file, records);
        try {
            VerdictFile.write(file, key, records);
        } catch (IOException | RuntimeException e) {
            if (unwritable.add(file)) {
                logger.warn(
                        "djl-amp: cannot keep verdicts in {} ({}); this JVM's checks are not"
                                + " reused by later ones",
                        file,
                        e.toString());
            }
        }
    }

    private Map<String, List<String>> records(String key) {
        Path file = fileFor(key);
        Map<String, List<String>> records = loaded.get(file);
        if (records != null) {
            return records;
        }
        try {
            records = VerdictFile.read(file, key);
            logger.info(
                    "djl-amp: reusing {} verdict(s) of djl-amp's checks kept in {} for this"
                            + " machine and these libraries (-D{}=recheck or"
                            + " AmpOptions.verdictMemory(RECHECK) checks again)",
                    records.size(),
                    file,
                    VerdictMemory.PROPERTY);
        } catch (NoSuchFileException e) {
            records = new LinkedHashMap<>();
        } catch (IOException | VerdictFile.Untrusted | RuntimeException e) {
            logger.warn(
                    "djl-amp: ignoring the kept verdicts in {}: {}; every kernel is checked again"
                            + " and the file rewritten",
                    file,
                    e.getMessage());
            records = new LinkedHashMap<>();
        }
        loaded.put(file, records);
        return records;
    }

    private static Map<String, List<String>> readQuietly(Path file, String key) {
        try {
            return VerdictFile.read(file, key);
        } catch (IOException | VerdictFile.Untrusted | RuntimeException e) {
            return new LinkedHashMap<>();
        }
    }

    private static String sha256(String text) {
        try {
            byte[] digest =
                    MessageDigest.getInstance("SHA-256")
                            .digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder sb = new StringBuilder();
            for (byte b : digest) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java has SHA-256", e);
        }
    }
}
