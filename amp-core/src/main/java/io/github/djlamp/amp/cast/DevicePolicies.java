package io.github.djlamp.amp.cast;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import io.github.djlamp.amp.cast.checkpoint.Checkpoints;
import io.github.djlamp.amp.cast.internal.WeightCastCache;
import io.github.djlamp.amp.policy.ModelPlan;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.amp.spi.MemoryLayout;
import io.github.djlamp.amp.verify.CanonicalKernels;
import io.github.djlamp.amp.verify.KernelVerification;
import io.github.djlamp.amp.verify.KernelVerifier;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The concrete policy of a wrapped block on each device, with the shadow tree that runs it: {@code
 * auto} resolved from what the engine layer says of the device (and, with kernel verification on,
 * what the check of the canonical layers finds there), then checked against the device.
 *
 * <p>The engine layer is found at the first use, from the manager of the first input, with the
 * weight cast cache and the kernel verifier that work through it.
 */
final class DevicePolicies {

    // under the wrapper's name, where a user configuring djl-amp's logging looks for it
    private static final Logger logger = LoggerFactory.getLogger(MixedPrecisionBlock.class);

    /**
     * A policy resolved for one device: the concrete policy, the plan of the tree under it, its
     * shadow tree (built from that plan), the structure of the tree it was built from, why the
     * policy was chosen, and the engine-autocast stages of that shadow that turned to fp32, with
     * why, by path.
     */
    record Resolved(
            PrecisionPolicy policy,
            ModelPlan plan,
            Block shadow,
            TreeStructure structure,
            String reason,
            CompiledRuns compiled,
            Map<String, String> engineFallbacks) {}

    /** A plan and the structure of the tree it was made from. */
    private record Planned(ModelPlan plan, TreeStructure structure) {}

    private final Block original;
    private final PrecisionPolicy policy;
    private final KernelVerification verification;
    private final IntermediateRelease release;
    private final Checkpoints checkpoints;
    private final Map<Device, Resolved> resolved = new ConcurrentHashMap<>();
    // the plan of the tree under each concrete policy, made once per tree
    private final Map<PrecisionPolicy, Planned> plans = new ConcurrentHashMap<>();
    private volatile AmpBackend backend;
    private volatile WeightCastCache castCache;
    private volatile KernelVerifier verifier;
    // the layout of 16-bit operands when the forward compiles, null when it does not
    private volatile MemoryLayout compileLayout;

    /**
     * Makes the resolution of a wrapped block's policy.
     *
     * @param configured the plan of the tree under the configured policy, made when the block was
     *     wrapped: the plan of every device when the policy is not {@code auto}
     */
    DevicePolicies(
            Block original,
            ModelPlan configured,
            KernelVerification verification,
            IntermediateRelease release,
            Checkpoints checkpoints) {
        this.original = original;
        this.policy = configured.getPolicy();
        this.verification = verification;
        this.release = release;
        this.checkpoints = checkpoints;
        keepPlan(configured);
    }

    /** Returns the policy and shadow tree for a device, resolved at its first use. */
    Resolved get(Device device, NDManager manager) {
        Resolved r = resolved.get(device);
        if (r != null) {
            return r;
        }
        findBackend(manager);
        return resolved.computeIfAbsent(device, d -> resolve(d, manager));
    }

    /** Returns the device's resolution, or null before its first forward. */
    Resolved peek(Device device) {
        return resolved.get(device);
    }

    /** Forgets every device's shadow tree: the checkpointed segments have changed. */
    void forget() {
        resolved.clear();
    }

    /**
     * Turns the compiled forward on (the 16-bit operands' layout given) or off (null); the next
     * forward on each device builds its shadow tree again.
     */
    void compileWith(MemoryLayout lowLayout) {
        compileLayout = lowLayout;
        resolved.clear();
    }

    /** Returns whether the shadow trees compile what they can. */
    boolean compiles() {
        return compileLayout != null;
    }

    /**
     * Forgets every device's resolution and every plan: the tree has changed.
     *
     * @param configured the plan of the changed tree under the configured policy
     */
    void treeChanged(ModelPlan configured) {
        plans.clear();
        keepPlan(configured);
        resolved.clear();
    }

    private void keepPlan(ModelPlan configured) {
        if (!configured.getPolicy().isAuto()) {
            plans.put(
                    configured.getPolicy(),
                    new Planned(configured, TreeStructure.of(configured.getRoot())));
        }
    }

    /** Returns the devices resolved so far. */
    Set<Device> resolvedDevices() {
        return resolved.keySet();
    }

    /** Returns the engine layer, or null before the first use. */
    AmpBackend backend() {
        return backend;
    }

    /** Returns the weight cast cache, or null before the first use. */
    WeightCastCache castCache() {
        return castCache;
    }

    /** Returns the kernel verifier, or null before the first use and when verification is off. */
    KernelVerifier verifier() {
        return verifier;
    }

    /** Returns the compute precisions of the devices resolved so far. */
    Set<Precision> computePrecisions() {
        Set<Precision> precisions = new HashSet<>();
        for (Resolved r : resolved.values()) {
            precisions.add(r.policy().getComputePrecision());
        }
        return precisions;
    }

    private void findBackend(NDManager manager) {
        if (backend != null) {
            return;
        }
        synchronized (this) {
            if (backend == null) {
                AmpBackend found = AmpBackends.forManager(manager);
                castCache = new WeightCastCache(found);
                if (verification == KernelVerification.ON) {
                    verifier = new KernelVerifier(found);
                }
                backend = found;
            }
        }
    }

    private Resolved resolve(Device device, NDManager manager) {
        DeviceCapabilities caps = backend.capabilities(device);
        if (policy.isAuto() && verification == KernelVerification.ON) {
            caps = confirmAuto(caps, manager);
        }
        PrecisionPolicy concrete =
                policy.isAuto() ? policy.resolveAuto(caps.getRecommended()) : policy;
        DeviceSupport.check(concrete, caps);
        // the tree may have changed since the plan was made (a head replaced before the first
        // forward): a plan is of the tree as it is when the shadow is built from it
        Planned planned =
                plans.compute(
                        concrete,
                        (p, known) ->
                                known != null && known.structure().isCurrent()
                                        ? known
                                        : new Planned(
                                                ModelPlan.of(
                                                        p,
                                                        original,
                                                        AmpBackends::supportEngineAutocast),
                                                TreeStructure.of(original)));
        ModelPlan plan = planned.plan();
        MemoryLayout layout = compileLayout;
        CompiledRuns compiled =
                layout == null || checkpoints.plan().isEnabled()
                        ? null
                        : new CompiledRuns(plan, layout, release, backend);
        Map<String, String> fallbacks = new ConcurrentHashMap<>();
        Block shadow =
                ShadowTree.build(
                        plan, release, checkpoints.plan(), checkpoints.tape(), compiled, fallbacks);
        if (compiled != null) {
            compiled.report(device);
        }
        return new Resolved(
                concrete,
                plan,
                shadow,
                planned.structure(),
                caps.getReason(),
                compiled,
                Collections.unmodifiableMap(fallbacks));
    }

    /**
     * Under {@code auto}, a 16-bit precision the device's flags recommend is taken only when the
     * canonical layers' kernels pass the check in it.
     */
    private DeviceCapabilities confirmAuto(DeviceCapabilities caps, NDManager manager) {
        DeviceCapabilities confirmed = CanonicalKernels.confirm(backend, caps, manager);
        if (confirmed != caps) {
            logger.warn("djl-amp: auto on {}: {}", caps.getDevice(), confirmed.getReason());
        }
        return confirmed;
    }
}
