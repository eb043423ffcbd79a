package io.github.djlamp.amp.capture;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.StepGraphs;
import java.util.List;

/**
 * What a {@link CapturedStep} asks of the training session it belongs to. The session implements it
 * ({@code AmpSession.captureStep}); it is not for users.
 */
public interface CaptureHooks {

    /**
     * Returns the trainer's device.
     *
     * @return the one device the step runs on
     */
    Device device();

    /**
     * Returns the manager the captured step's arrays live under: the trainer's.
     *
     * @return the manager
     */
    NDManager manager();

    /**
     * Returns the engine's graphs.
     *
     * @return the graphs
     */
    StepGraphs graphs();

    /**
     * Returns why this session's steps cannot be replayed as captured (several devices, a loss
     * scale read on the host, a per-parameter update, ...), each with what to change.
     *
     * @return the reasons, empty when a capture can hold
     */
    List<String> refusals();

    /**
     * Copies each source into its destination on the device, in place.
     *
     * @param destinations the arrays a graph reads
     * @param sources the batch's arrays, of the same shapes and types
     */
    void copy(NDList destinations, NDList sources);

    /**
     * Lists the arrays a graph reads and writes in place that the session may replace by others
     * between steps (every parameter's, BatchNorm's running statistics too, the fused optimizer's
     * state and count, the loss scaler's state, replaced when state is loaded): a graph captured
     * with other arrays would read the old ones.
     *
     * @param into the list to fill, in an order that does not change while the arrays do not
     */
    void stateArrays(List<Object> into);

    /**
     * Lists every array a step changes, for the check of the first replay against an eager step:
     * every parameter (BatchNorm's running statistics too), the fused optimizer's state and count,
     * the loss scaler's state.
     *
     * @param into the list to fill
     */
    void checkedArrays(List<NDArray> into);

    /**
     * Where a step draws random numbers (dropout) and whether only from the device's default
     * generator, which graphs may put back ({@link StepGraphs#repeatsRandomDraws}).
     *
     * @param where the block, in words (for example {@code "02Dropout draws random numbers"})
     * @param fromDefaultGenerator whether every draw comes from the default generator
     */
    record RandomDraws(String where, boolean fromDefaultGenerator) {}

    /**
     * Returns where the step draws random numbers, or null: a replay is compared with an eager step
     * of such a step only where every draw comes from the default generator and the graphs put it
     * back between the two.
     *
     * @return the draws, or null
     */
    RandomDraws randomDraws();

    /** Before the first step: host reads of device state move out of the step, between steps. */
    void begin();

    /** Ends a step after its body: {@code AmpSession.step()}, captured with the body. */
    void step();

    /** After a replayed step: advances what the step's Java code keeps on the host. */
    void afterReplay();

    /** After every step, outside any capture: the host read of device state that is due, if one. */
    void afterStep();

    /** Before a capture's region runs: what the step's Java code counts on the host is noted. */
    void beforeCapture();

    /**
     * Forgets a step whose capture did not hold (invalidated, at once or at its end, or failed):
     * what its Java code counted on the host since {@link #beforeCapture()} is taken back, and it
     * runs again eagerly.
     */
    void abandonStep();

    /** After the last step: host reads return into the step. */
    void end();
}
