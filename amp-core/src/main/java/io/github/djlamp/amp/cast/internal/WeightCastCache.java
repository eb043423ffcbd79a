package io.github.djlamp.amp.cast.internal;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Parameter;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Each weight cast once per training step per device: a cast is reused while it is alive on the
 * step's manager, made from the same master array, and its master has not been updated since.
 *
 * <p>Casts are owned by the step's manager (the batch's, in {@code EasyTrain}), so they are freed
 * when the step ends; the cache only remembers them until then, and forgets a parameter's casts
 * when the optimizer updates it.
 *
 * <p>A weight read that finds no valid cast casts, in the same engine call, every weight of its
 * device, precision and layout read before whose cast is gone: the step's first weight read casts
 * the step's weights at once (one call instead of one a layer, the host's cost at small batches). A
 * weight no forward reads any more is still cast each step until the cache is cleared.
 *
 * <p>A cast made while autograd was not recording (a training-mode forward with no gradient
 * collector open: a loss logged by hand before the step's own forward) is no node of any graph:
 * reused by a recording forward, the gradient would stop at it and never reach the master. Such a
 * cast serves only forwards that do not record either.
 */
public final class WeightCastCache {

    private final AmpBackend backend;

    /** Parameter id to that parameter's casts (one per device, precision and layout). */
    private final Map<String, Map<Key, Entry>> entries = new ConcurrentHashMap<>();

    /**
     * Per device, precision and layout: each parameter cast so far and its master when last cast,
     * in the order of their first reads; a synchronized map's lock guards each.
     */
    private final Map<Key, Map<String, NDArray>> masters = new ConcurrentHashMap<>();

    private final AtomicLong castsMade = new AtomicLong();

    /**
     * Creates an empty cache.
     *
     * @param backend the engine layer that casts
     */
    public WeightCastCache(AmpBackend backend) {
        this.backend = backend;
    }

    /**
     * Returns {@code master} in {@code target} precision, cast now or earlier in this step.
     *
     * @param parameter the parameter {@code master} is a device copy of
     * @param master the fp32 master on its device
     * @param target the precision to compute in
     * @param layout the memory layout of the cast
     * @param stepManager the manager that owns this step's arrays
     * @return the cast, owned by {@code stepManager}
     */
    public NDArray get(
            Parameter parameter,
            NDArray master,
            Precision target,
            MemoryLayout layout,
            NDManager stepManager) {
        return get(parameter, master, target, layout, stepManager, isRecording());
    }

    /**
     * Returns {@code master} in {@code target} precision, as {@link #get(Parameter, NDArray,
     * Precision, MemoryLayout, NDManager)}, for a forward that knows whether autograd records.
     *
     * @param parameter the parameter {@code master} is a device copy of
     * @param master the fp32 master on its device
     * @param target the precision to compute in
     * @param layout the memory layout of the cast
     * @param stepManager the manager that owns this step's arrays
     * @param recording whether autograd records this forward
     * @return the cast, owned by {@code stepManager}
     */
    public NDArray get(
            Parameter parameter,
            NDArray master,
            Precision target,
            MemoryLayout layout,
            NDManager stepManager,
            boolean recording) {
        Key key = new Key(master.getDevice(), target, layout);
        Map<Key, Entry> casts =
                entries.computeIfAbsent(parameter.getId(), id -> new ConcurrentHashMap<>());
        Entry cached = casts.get(key);
        if (cached != null && cached.isValidFor(master, stepManager, recording)) {
            return cached.cast();
        }
        Map<String, NDArray> cast =
                castTogether(key, parameter.getId(), master, stepManager, recording);
        return cast.get(parameter.getId());
    }

    /**
     * Casts {@code master} together with every parameter cast in this key before whose cast does
     * not serve this forward (a new step, an update, a cast autograd did not record), in one engine
     * call: the step's first weight read casts the weights the forward will read after it.
     */
    private Map<String, NDArray> castTogether(
            Key key, String parameterId, NDArray master, NDManager stepManager, boolean recording) {
        Map<String, NDArray> stale = new LinkedHashMap<>();
        stale.put(parameterId, master);
        Map<String, NDArray> read = masters.computeIfAbsent(key, k -> new LinkedHashMap<>());
        synchronized (read) {
            read.put(parameterId, master);
            for (Map.Entry<String, NDArray> known : read.entrySet()) {
                NDArray last = known.getValue();
                if (stale.containsKey(known.getKey()) || last.isReleased()) {
                    continue;
                }
                Map<Key, Entry> casts = entries.get(known.getKey());
                Entry cached = casts == null ? null : casts.get(key);
                if (cached == null || !cached.isValidFor(last, stepManager, recording)) {
                    stale.put(known.getKey(), last);
                }
            }
        }
        List<NDArray> toCast = new ArrayList<>(stale.values());
        NDList made = backend.castAll(toCast, key.precision(), key.layout(), stepManager);
        castsMade.addAndGet(toCast.size());
        Map<String, NDArray> byId = new HashMap<>();
        int i = 0;
        for (Map.Entry<String, NDArray> e : stale.entrySet()) {
            NDArray cast = made.get(i++);
            byId.put(e.getKey(), cast);
            entries.computeIfAbsent(e.getKey(), id -> new ConcurrentHashMap<>())
                    .put(key, new Entry(e.getValue(), cast, recording));
        }
        return byId;
    }

    /**
     * Returns whether autograd records now; an engine layer that cannot tell is taken to record.
     *
     * @return whether a cast made now is recorded
     */
    public boolean isRecording() {
        try {
            return backend.isRecording();
        } catch (UnsupportedOperationException e) {
            return true;
        }
    }

    /**
     * Casts {@code master} without remembering the result: for inference, where nothing tells the
     * cache that the weights changed (a model loaded anew, an optimizer outside djl-amp).
     *
     * @param master the fp32 master on its device
     * @param target the precision to compute in
     * @param layout the memory layout of the cast
     * @param stepManager the manager that owns the result
     * @return the cast, owned by {@code stepManager}
     */
    public NDArray cast(
            NDArray master, Precision target, MemoryLayout layout, NDManager stepManager) {
        castsMade.incrementAndGet();
        return backend.cast(master, target, layout, stepManager);
    }

    /**
     * Forgets the casts of one parameter: its master has changed.
     *
     * @param parameterId the parameter's id
     */
    public void invalidate(String parameterId) {
        entries.remove(parameterId);
    }

    /** Forgets every cast. */
    public void clear() {
        entries.clear();
        masters.clear();
    }

    /**
     * Returns the number of casts made so far, for tests and diagnostics.
     *
     * @return casts made
     */
    public long getCastsMade() {
        return castsMade.get();
    }

    /**
     * A cast, the master it was made from (loading a model replaces the master arrays) and whether
     * autograd recorded the cast.
     */
    private record Entry(NDArray master, NDArray cast, boolean recorded) {
        boolean isValidFor(NDArray currentMaster, NDManager stepManager, boolean recording) {
            return master == currentMaster
                    && (recorded || !recording)
                    && !cast.isReleased()
                    && cast.getManager() == stepManager;
        }
    }

    private record Key(Device device, Precision precision, MemoryLayout layout) {}
}
