package io.github.djlamp.amp.train;

import ai.djl.training.optimizer.Optimizer;
import java.util.List;
import java.util.Map;

/**
 * One of DJL's optimizers as djl-amp runs it fused: which DJL class it stands for, the settings its
 * kernel takes (read from DJL's optimizer), the state it keeps per parameter and its section of the
 * optimizer-state file. {@link FusedOptimizerKinds} lists the kinds; adding one is a file like
 * {@link FusedSgd} and a line there.
 *
 * <p>A kind keeps the same buffers as DJL's optimizer, in the same order, so that a state saved on
 * one path (DJL's per-parameter update or the fused step) resumes on the other. Kinds are
 * stateless: every method reads what it needs from the DJL optimizer it is given, through {@link
 * DjlOptimizers}, since DJL keeps these settings in private fields with no getters.
 */
interface FusedOptimizerKind {

    /**
     * Returns the DJL optimizer class this kind stands for; a subclass is another optimizer.
     *
     * @return the class
     */
    Class<? extends Optimizer> optimizerClass();

    /**
     * Returns this kind's code in the optimizer-state file's header: never reused for another kind.
     *
     * @return the code
     */
    int stateFileCode();

    /**
     * Names the optimizer of a saved state in messages.
     *
     * @param buffersPerParameter the buffers the state holds per parameter
     * @return e.g. {@code Sgd with momentum}
     */
    String describe(int buffersPerParameter);

    /**
     * Returns DJL's per-parameter state maps, one per buffer, in the order the fused step keeps its
     * buffers and the state file stores them: each a private field of {@link #optimizerClass()}
     * mapping a parameter id to its array per device.
     *
     * @param optimizer DJL's optimizer of this kind
     * @return the fields' names, empty when the optimizer keeps no state (SGD without momentum)
     */
    List<String> stateFields(Optimizer optimizer);

    /**
     * Returns the kernel that reproduces the optimizer's update and the settings it takes.
     *
     * @param optimizer DJL's optimizer of this kind
     * @return the kernel
     */
    Kernel kernel(Optimizer optimizer);

    /**
     * Returns what the fused step's first buffer is multiplied by to be DJL's, for a momentum
     * buffer the kernel keeps without the learning rate where DJL keeps it inside; 1 for a kind
     * whose buffers are DJL's as they are.
     *
     * @param fixedRate the step's constant learning rate, NaN when it follows a schedule
     * @return the factor
     */
    default float firstBufferToDjl(float fixedRate) {
        return 1f;
    }

    /**
     * A fused kernel of the engine and its own settings.
     *
     * @param name the kernel's name, the DJL optimizer it reproduces in lower case
     * @param settings the settings by the names the kernel reads them under
     */
    record Kernel(String name, Map<String, Float> settings) {}
}
