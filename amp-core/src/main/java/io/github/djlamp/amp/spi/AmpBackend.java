package io.github.djlamp.amp.spi;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import io.github.djlamp.amp.compile.ForwardGraph;
import io.github.djlamp.amp.policy.Precision;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The engine-specific operations mixed precision needs and DJL's public API lacks.
 *
 * <p>Implementations are registered in {@code
 * META-INF/services/io.github.djlamp.amp.spi.AmpBackend} and found by {@link
 * AmpBackends#forManager(NDManager)}. The PyTorch implementation lives in the {@code
 * amp-djl-engine} module.
 */
public interface AmpBackend {

    /**
     * Returns the DJL engine this backend serves, as {@link ai.djl.engine.Engine#getEngineName()}
     * reports it.
     *
     * @return the engine name, e.g. {@code PyTorch}
     */
    String getEngineName();

    /**
     * Describes what of the engine's libraries and their settings the results of its kernels depend
     * on: part of the key of the verdicts djl-amp keeps on disk, so that a verdict is reused only
     * where this is the same. An engine whose kernels read an environment setting (an ISA cap, say)
     * includes the setting in force.
     *
     * <p>The default is the engine's name and version.
     *
     * @return one line, for example {@code PyTorch 2.7.1}
     */
    default String kernelEnvironment() {
        return getEngineName() + " " + ai.djl.engine.Engine.getEngine(getEngineName()).getVersion();
    }

    /**
     * Prepares the engine's kernels before the first training step, called by {@code
     * Amp.configure}: an engine whose kernels a kept verdict says are wrong on this machine, and
     * that has a cure which must be applied before its first kernel, applies it here where {@code
     * cureAllowed}, and says what it did (or what the user should set, where it is too late); so
     * does one that keeps its kernels away from a platform known to end the JVM (PyTorch's, on a
     * CPU whose cache topology is hidden: oneDNN off).
     *
     * <p>The default does nothing.
     *
     * @param cureAllowed false when the user opted out of an in-process cure
     */
    default void preparePlatform(boolean cureAllowed) {}

    /**
     * Casts a floating-point array to another precision, on its own device, recorded by autograd so
     * that gradients flow back to the source in the source's precision.
     *
     * <p>The result belongs to {@code resultManager}: close that manager (or the result) to free
     * it. When the array already has the target precision a new handle to the same data is
     * returned.
     *
     * @param array an FP32, FP16 or BF16 array
     * @param target the precision to cast to
     * @param resultManager the manager that owns the result
     * @return the cast array
     * @throws io.github.djlamp.amp.exception.AmpException if {@code array} is not floating point
     */
    default NDArray cast(NDArray array, Precision target, NDManager resultManager) {
        return cast(array, target, MemoryLayout.PRESERVE, resultManager);
    }

    /**
     * Casts like {@link #cast(NDArray, Precision, NDManager)}, into a given memory layout.
     *
     * @param array an FP32, FP16 or BF16 array
     * @param target the precision to cast to
     * @param layout the memory layout of the result
     * @param resultManager the manager that owns the result
     * @return the cast array
     * @throws io.github.djlamp.amp.exception.AmpException if {@code array} is not floating point
     */
    NDArray cast(NDArray array, Precision target, MemoryLayout layout, NDManager resultManager);

    /**
     * Casts several arrays as {@link #cast(NDArray, Precision, MemoryLayout, NDManager)} does each,
     * in as few engine calls as the engine allows: a step's weight casts made at once.
     *
     * @param arrays FP32, FP16 or BF16 arrays on one device
     * @param target the precision to cast to
     * @param layout the memory layout of the results (channels-last for 4-dimensional arrays only)
     * @param resultManager the manager that owns the results
     * @return the casts, in the order of {@code arrays}
     * @throws io.github.djlamp.amp.exception.AmpException if an array is not floating point
     */
    default NDList castAll(
            List<NDArray> arrays, Precision target, MemoryLayout layout, NDManager resultManager) {
        NDList casts = new NDList(arrays.size());
        for (NDArray array : arrays) {
            casts.add(cast(array, target, layout, resultManager));
        }
        return casts;
    }

    /**
     * Returns the precision of an array, knowing bfloat16 where DJL reports {@code UNKNOWN}.
     *
     * @param array an array
     * @return its precision, or null when it is not FP32, FP16 or BF16
     */
    Precision precisionOf(NDArray array);

    /**
     * PyTorch's fused {@code _amp_foreach_non_finite_check_and_unscale_}: multiplies every array by
     * {@code invScale} in place, and sets {@code foundInf} to 1 if any element of any array is
     * +Inf, -Inf or NaN. Nothing is read back to the host.
     *
     * @param gradients the arrays to unscale in place, all on the device of {@code foundInf}
     * @param foundInf a one-element FP32 array, left as it is when every value is finite
     * @param invScale a one-element FP32 array holding 1/scale
     */
    void unscaleAndCheck(NDList gradients, NDArray foundInf, NDArray invScale);

    /**
     * Reads the first element of an array on the host as a float, any precision, any device. The
     * host copy is freed before this returns and nothing is attached to the array's manager: DJL's
     * own {@code getFloat()} on a GPU array attaches its host copy to a new sub-manager of the
     * array's manager that nothing closes (one array and one manager leaked per read on a
     * long-lived manager). Every host read of a device value in djl-amp goes through here. It still
     * waits for the device's queued work: keep it out of the per-step path where possible.
     *
     * @param array an array with at least one element
     * @return its first element as a float
     */
    float readFloat(NDArray array);

    /**
     * Reads every element of an array on the host as floats, any precision, any device: one wait
     * for the device and one copy, with {@link #readFloat(NDArray)}'s care for managers.
     *
     * @param array an array
     * @return its elements, flattened, as floats
     */
    float[] readFloats(NDArray array);

    /**
     * One fused optimizer step over every parameter, skipped on the device when the step's {@code
     * foundInf} is non-zero (PyTorch's {@code _fused_sgd_}, {@code _fused_adam_}, ...; no host
     * read). The kernel the step names reproduces the update of the DJL optimizer it is named
     * after, with that optimizer's semantics for the settings, the weight decay, the learning rate
     * and the gradient adjustment; djl-amp's file for each fused optimizer says which. The counter
     * advances only when the step is not skipped, and a skipped step leaves weights and state
     * bitwise as they were. Every gradient is zeroed afterwards, skipped or not.
     *
     * @param step the kernel, its settings and the arrays it updates
     * @throws io.github.djlamp.amp.exception.AmpException when this engine has no kernel of that
     *     name
     */
    void fusedStep(FusedOptimizerStep step);

    /**
     * Copies each source into its destination in place, NaN and Inf included ({@code
     * torch._foreach_copy_}); used to restore state a skipped step must not change.
     *
     * @param destinations the arrays to overwrite
     * @param sources the values, one per destination, of the same shapes
     */
    void copy(NDList destinations, NDList sources);

    /**
     * Where {@code foundInf} is non-zero, copies each saved array back into its live one in place,
     * NaN and Inf included; otherwise leaves them as they are. Decided on the device ({@code
     * where(foundInf != 0, saved, live)}, one call for the whole list, no host read); used to put
     * back BatchNorm's running statistics when a step is skipped on the device.
     *
     * @param live the arrays to overwrite on a skip
     * @param saved their values from before the step, one per live array, of the same shapes
     * @param foundInf a one-element FP32 array on their device, non-zero to restore
     */
    void restoreWhere(NDList live, NDList saved, NDArray foundInf);

    /**
     * Sets every element of every array to zero in place, NaN and Inf included ({@code
     * torch._foreach_zero_}); used to clear the gradients of a skipped step, which DJL never zeroes
     * outside its optimizers' native updates.
     *
     * @param arrays the arrays to clear
     */
    void zero(NDList arrays);

    /**
     * PyTorch's {@code _amp_update_scale_}, GradScaler's scale update, in place on the device: on
     * {@code foundInf != 0} the scale is multiplied by {@code backoffFactor} and the tracker reset
     * to 0; otherwise the tracker counts up and, when it reaches {@code growthInterval}, the scale
     * is multiplied by {@code growthFactor} (if the result is finite) and the tracker reset.
     *
     * @param scale a one-element FP32 array holding the scale
     * @param growthTracker a one-element INT32 array counting clean steps
     * @param foundInf a one-element FP32 array, non-zero when the step overflowed
     * @param growthFactor the factor applied on growth
     * @param backoffFactor the factor applied on overflow
     * @param growthInterval clean steps between growths
     */
    void updateScale(
            NDArray scale,
            NDArray growthTracker,
            NDArray foundInf,
            double growthFactor,
            double backoffFactor,
            int growthInterval);

    /**
     * djl-amp's dynamic scale update decided on the device, with the host mirror's semantics
     * (hysteresis, minimum and maximum, float64 arithmetic): on overflow the skip is counted and,
     * after {@code hysteresis} overflows, the scale backs off, unless that would take it below the
     * minimum, in which case the scale stays and {@code collapsed} is set to 1 for the host to
     * report; a clean step counts towards growth, capped at the maximum. Nothing is read back.
     *
     * @param state the device state, updated in place
     * @param foundInf a one-element FP32 array, non-zero when the step overflowed
     * @param settings growth, backoff, hysteresis, minimum and maximum of the dynamic scale
     */
    void updateScaleWithHysteresis(
            DeviceScaleState state, NDArray foundInf, DynamicScaleSettings settings);

    /**
     * Runs {@code pass}, an fp32 pass of a kernel check on {@code device} (the reference or the
     * absolute sums, on the sampled rows: shapes training may never run), where the engine's tuned
     * kernels are safe for it. PyTorch's engine runs it without oneDNN on a CPU whose cache
     * topology the kernel hides ({@link io.github.djlamp.amp.verify.CacheTopology}): there oneDNN
     * sizes its blocking from cache sizes it cannot read, and a convolution's backward on such a
     * shape divided by zero, ending the JVM. The default runs it.
     *
     * @param device the device the pass runs on
     * @param pass the pass
     * @param <T> what it returns
     * @return what it returns
     */
    default <T> T referencePass(Device device, Supplier<T> pass) {
        return pass.get();
    }

    /**
     * Evaluates {@code function} on detached copies of {@code inputs} with autograd recording on,
     * whatever the caller's recording state, and back-propagates {@code cotangent} from its output
     * into those copies only: the caller's own graph, gradients and random state are untouched.
     * djl-amp checks a 16-bit kernel against fp32 with it, once per operation signature.
     *
     * @param function the computation, given the copies in the order of {@code inputs}
     * @param inputs the arrays to differentiate with respect to, any floating precision and layout
     * @param cotangent the gradient that reaches the output, of the output's shape and precision
     * @param resultManager the manager that owns the results
     * @return the output followed by the gradient of each input (zeros where none reached it), each
     *     a contiguous fp32 array on {@code resultManager}
     */
    NDList valueAndGradients(
            Function<NDList, NDArray> function,
            NDList inputs,
            NDArray cotangent,
            NDManager resultManager);

    /**
     * Returns what a device can compute usefully in reduced precision.
     *
     * @param device the device
     * @return its capabilities and the recommended precision with the reason
     */
    DeviceCapabilities capabilities(Device device);

    /**
     * Throws when handing {@code array} to the DJL operation {@code operation} would terminate the
     * JVM (bf16 arrays in DJL's PyTorch engine); does nothing otherwise.
     *
     * @param array the array about to be passed to DJL
     * @param operation what is about to happen, for the message (e.g. {@code "backward"})
     * @throws io.github.djlamp.amp.exception.AmpException naming the operation and what to do
     *     instead
     */
    void requireDjlSafe(NDArray array, String operation);

    /**
     * Turns autograd's recording on or off for the calling thread (PyTorch's grad mode): a
     * checkpointed segment runs its forward pass without recording and is recomputed with it.
     *
     * @param recording whether operations record the graph backward needs
     * @return whether they recorded before the call
     */
    default boolean setRecording(boolean recording) {
        throw new UnsupportedOperationException(
                getEngineName()
                        + "'s engine layer cannot switch autograd's recording off and on,"
                        + " which activation checkpointing needs: use Checkpointing.none()");
    }

    /**
     * Returns whether operations on the calling thread record autograd's graph.
     *
     * @return PyTorch's grad mode
     */
    default boolean isRecording() {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot tell whether autograd records");
    }

    /**
     * Makes {@code array}, computed without recording, a leaf of autograd's graph that collects the
     * gradient reaching it (in any floating precision, bf16 included).
     *
     * @param array an array no graph produced
     */
    default void requireGradient(NDArray array) {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot make a leaf that collects gradients");
    }

    /**
     * Returns whether autograd tracks {@code array} (a leaf that collects gradients, or the result
     * of a recorded operation on one). The kernel check asks it to know whether a layer's input
     * gradient is computed, and so checked.
     *
     * <p>The default answers DJL's {@code hasGradient()}, which is right for leaves; an engine
     * layer whose engine says false for the results of recorded operations (DJL's PyTorch engine
     * does) overrides it.
     *
     * @param array any array
     * @return PyTorch's {@code requires_grad}
     */
    default boolean requiresGradient(NDArray array) {
        return array.hasGradient();
    }

    /**
     * Returns a new leaf with {@code array}'s values (sharing its memory) that collects the
     * gradient reaching it, cut from the graph that produced {@code array}.
     *
     * @param array any floating array
     * @param manager the manager that owns the leaf
     * @return the leaf
     */
    default NDArray detachedLeaf(NDArray array, NDManager manager) {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot detach an array from its graph");
    }

    /**
     * Returns the gradient a leaf collected, or null when none reached it; unlike DJL's {@code
     * getGradient()}, which makes zeros then, and works in bf16.
     *
     * @param leaf an array that collects gradients
     * @param manager the manager that owns the result
     * @return its gradient (sharing the leaf's gradient memory), or null
     */
    default NDArray gradientOrNull(NDArray leaf, NDManager manager) {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot read a leaf's gradient");
    }

    /**
     * Back-propagates {@code gradient} from {@code output} through the graph that made it, adding
     * into the gradients of the leaves it reaches (parameters included), in any floating precision.
     *
     * @param output an array recorded in a graph, or a leaf (whose gradient collects {@code
     *     gradient})
     * @param gradient the gradient at {@code output}, of its shape and precision
     * @param keepGraph whether the graph stays for another backward through it
     */
    default void backward(NDArray output, NDArray gradient, boolean keepGraph) {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot back-propagate a given gradient");
    }

    /**
     * Gives back to the system what the engine's allocators keep of memory that was allocated and
     * freed (the C allocator's free lists on the CPU, the caching allocator's reserve on a GPU):
     * called once after a step in which djl-amp's kernel checks ran, so that a memory limit need
     * not fit what the checks made and freed. The default does nothing.
     *
     * @param device the device the checks ran on
     */
    default void releaseFreedMemory(Device device) {}

    /**
     * Back-propagates {@code gradients} from {@code outputs} through the graph that made them and
     * returns the gradients of {@code inputs} as the graph computed them, memory layout included:
     * not added into any leaf's gradient, where autograd would copy them into the leaf's own
     * layout. The gradients of {@code parameters} are added into theirs, as {@link #backward} adds
     * them. A checkpointed segment's recomputation hands the input gradients on to the graph or
     * segment before it, whose backward kernels then see what an uncheckpointed backward gives
     * them.
     *
     * @param outputs arrays recorded in one graph
     * @param gradients the gradients at {@code outputs}, one each, of their shapes and precisions
     * @param inputs leaves of the graph whose gradients are returned
     * @param parameters leaves of the graph whose gradients collect theirs
     * @param manager the manager that owns the returned gradients
     * @return one gradient per input, null where the graph does not reach it
     */
    default List<NDArray> backwardTo(
            NDList outputs, NDList gradients, NDList inputs, NDList parameters, NDManager manager) {
        throw new UnsupportedOperationException(
                getEngineName()
                        + "'s engine layer cannot return the gradients a backward brings its"
                        + " inputs");
    }

    /**
     * Returns the block that runs in {@code block}'s place in the check of a block the engine's
     * autocast runs whole. The check runs in inference mode (no dropout drawn, BatchNorm on its
     * running statistics) and differentiates what it ran. An engine whose inference forward of a
     * block records nothing (libtorch runs a TorchScript module's under its inference mode) returns
     * a stand-in that runs the block as its inference forward would, recording; wherever such a
     * block sits in the checked block's tree, the check runs a copy of the tree down to it with the
     * stand-in in its place. The default is {@code block} itself.
     *
     * @param block a block in the tree of a block the engine's autocast runs
     * @return its stand-in, or {@code block}
     */
    default Block recordingForCheck(Block block) {
        return block;
    }

    /**
     * Returns whether {@code block}'s forward computes with arrays it holds itself rather than
     * those a {@code ParameterStore} hands it (a TorchScript module keeps its weights in the
     * module): a check then differentiates with respect to those arrays, as they are. The default
     * is false.
     *
     * @param block a block the engine's autocast runs
     * @return whether it computes with its own parameter arrays
     */
    default boolean computesWithOwnParameters(Block block) {
        return false;
    }

    /**
     * Returns whether {@code block} can run under the engine's own autocast ({@link
     * #withEngineAutocast}): its forward pass is the engine's native code (a TorchScript module),
     * or DJL code that hands its arrays to the engine without reading any of their data types (so
     * the 16-bit arrays autocast makes inside never reach DJL code that would reject them), and the
     * engine's autocast chooses the precision of each operation inside it. The answer depends on
     * the block's class only.
     *
     * <p>The default is false: the engine has no autocast that djl-amp can switch on.
     *
     * @param block a block of the wrapped tree
     * @return whether the engine's autocast can run it
     */
    default boolean supportsEngineAutocast(Block block) {
        return false;
    }

    /**
     * Returns why the engine's autocast would not compute {@code block} on {@code device} in {@code
     * precision} as the policy asks, or null when it would. A block {@link #supportsEngineAutocast}
     * accepts may still be computed by the engine's autocast in another precision on some devices
     * (libtorch's CUDA autocast runs cuDNN's recurrent kernels in fp16 whatever precision it was
     * given); djl-amp then runs the block in fp32 and says why, instead of reporting a precision
     * that was not used.
     *
     * <p>The default is null: the engine computes what it is asked.
     *
     * @param block a block {@link #supportsEngineAutocast} accepts
     * @param device the device the forward computes on
     * @param precision FP16 or BF16, the policy's compute precision
     * @return the reason, naming what the user can do, or null
     */
    default String engineAutocastRefusal(Block block, Device device, Precision precision) {
        return null;
    }

    /**
     * Runs {@code forward} with the engine's own autocast on for {@code device} in {@code
     * precision}, as PyTorch's {@code torch.autocast} does: each operation inside chooses its
     * precision (matrix products and convolutions in 16 bits, reductions and normalizations in
     * fp32), parameters stay fp32 and receive fp32 gradients. The calling thread's previous
     * autocast state is put back on every way out, exceptions included, so that uses nest. The
     * outputs may be 16-bit arrays: the caller casts them before DJL code reads their data type.
     *
     * @param device the device the forward computes on
     * @param precision FP16 or BF16
     * @param forward the computation
     * @param <T> what it returns
     * @return what {@code forward} returned
     * @throws UnsupportedOperationException when the engine has no autocast djl-amp can switch on
     *     (then {@link #supportsEngineAutocast} is false for every block)
     */
    default <T> T withEngineAutocast(Device device, Precision precision, Supplier<T> forward) {
        throw new UnsupportedOperationException(
                getEngineName()
                        + "'s engine layer has no autocast djl-amp can switch on: TorchScript"
                        + " modules and recurrent blocks run in fp32");
    }

    /**
     * Makes {@code graph} into one native call of the engine (a prototype: djl-amp asks only when
     * the user turned the compiled forward on).
     *
     * <p>The default refuses: the engine runs every operation on its own.
     *
     * @param graph the forward, its parameters in order
     * @return the compiled forward, owned by the caller
     * @throws UnsupportedOperationException when the engine cannot compile a forward
     */
    default CompiledForward compileForward(ForwardGraph graph) {
        throw new UnsupportedOperationException(
                getEngineName() + "'s engine layer cannot compile a forward");
    }

    /**
     * Returns the engine's graphs of device work, through which djl-amp captures a training step
     * once and replays it ({@code AmpSession.captureStep}).
     *
     * <p>The default has none: every capture is refused, naming the engine.
     *
     * @return the graphs
     */
    default StepGraphs stepGraphs() {
        return StepGraphs.unavailable(
                getEngineName() + "'s engine layer cannot capture a step into a graph");
    }
}
