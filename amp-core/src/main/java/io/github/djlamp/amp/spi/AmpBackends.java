package io.github.djlamp.amp.spi;

import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import io.github.djlamp.amp.exception.AmpException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.ConcurrentHashMap;

/** Finds the {@link AmpBackend} for a DJL engine through {@link ServiceLoader}. */
public final class AmpBackends {

    private static final Map<String, AmpBackend> CACHE = new ConcurrentHashMap<>();
    private static volatile List<AmpBackend> all;

    private AmpBackends() {}

    /**
     * Returns the backend for the engine that owns {@code manager}.
     *
     * @param manager a manager of the engine to serve
     * @return the backend
     * @throws AmpException naming the dependency to add when no backend serves that engine
     */
    public static AmpBackend forManager(NDManager manager) {
        return forEngine(manager.getEngine().getEngineName());
    }

    /**
     * Returns the backend for a DJL engine by name.
     *
     * @param engineName the engine name, e.g. {@code PyTorch}
     * @return the backend, one instance per engine for the life of the JVM
     * @throws AmpException naming the dependency to add when no backend serves that engine
     */
    public static AmpBackend forEngine(String engineName) {
        return CACHE.computeIfAbsent(engineName, AmpBackends::load);
    }

    /**
     * Lets the default engine's backend prepare its kernels ({@link
     * AmpBackend#preparePlatform(boolean)}); does nothing where no backend serves that engine.
     *
     * @param cureAllowed false when the user opted out of an in-process cure
     */
    public static void preparePlatform(boolean cureAllowed) {
        AmpBackend backend;
        try {
            backend = forEngine(ai.djl.engine.Engine.getDefaultEngineName());
        } catch (RuntimeException e) {
            return; // no engine or no backend: nothing to prepare
        }
        backend.preparePlatform(cureAllowed);
    }

    /**
     * Returns whether a backend on the class or module path runs {@code block} under its engine's
     * own autocast ({@link AmpBackend#supportsEngineAutocast(Block)}): a block belongs to the
     * engine whose classes it is made of, so the shadow tree asks every backend, needing no
     * manager.
     *
     * @param block a block of the wrapped tree
     * @return true when one backend says so
     */
    public static boolean supportEngineAutocast(Block block) {
        List<AmpBackend> backends = all;
        if (backends == null) {
            backends = new ArrayList<>();
            for (AmpBackend backend : ServiceLoader.load(AmpBackend.class)) {
                backends.add(forEngine(backend.getEngineName()));
            }
            all = List.copyOf(backends);
        }
        for (AmpBackend backend : backends) {
            if (backend.supportsEngineAutocast(block)) {
                return true;
            }
        }
        return false;
    }

    private static AmpBackend load(String engineName) {
        List<String> found = new ArrayList<>();
        for (AmpBackend backend : ServiceLoader.load(AmpBackend.class)) {
            if (backend.getEngineName().equals(engineName)) {
                return backend;
            }
            found.add(backend.getEngineName());
        }
        throw new AmpException(
                "No djl-amp backend for the DJL engine '"
                        + engineName
                        + "' is on the class path or module path (found: "
                        + (found.isEmpty() ? "none" : String.join(", ", found))
                        + "). Add the dependency io.github.djlamp:amp-djl-engine and use DJL's"
                        + " PyTorch engine (ai.djl.pytorch:pytorch-engine).");
    }
}
