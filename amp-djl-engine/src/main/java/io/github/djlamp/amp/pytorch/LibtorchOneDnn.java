package io.github.djlamp.amp.pytorch;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.util.function.Supplier;

/**
 * libtorch's own switch for oneDNN ({@code at::Context::setUserEnabledMkldnn}, what PyTorch's
 * {@code torch.backends.mkldnn.enabled} sets), reached through JNA: with it off, libtorch runs its
 * own convolution kernels instead of oneDNN's. The switch is the process's, not the thread's: a
 * convolution another thread runs meanwhile runs without oneDNN too (right, slower).
 */
final class LibtorchOneDnn {

    private static final String GLOBAL_CONTEXT = "_ZN2at13globalContextEv";
    private static final String SET_ENABLED = "_ZN2at7Context20setUserEnabledMkldnnEb";
    private static final String IS_ENABLED = "_ZNK2at7Context17userEnabledMkldnnEv";

    private static final Object LOCK = new Object();
    private static volatile LibtorchOneDnn instance;

    private final Pointer context;
    private final Function setEnabled;
    private final Function isEnabled;
    private int depth;
    private boolean enabledBefore;

    private LibtorchOneDnn(NativeLibrary library) {
        context = library.getFunction(GLOBAL_CONTEXT).invokePointer(new Object[0]);
        setEnabled = library.getFunction(SET_ENABLED);
        isEnabled = library.getFunction(IS_ENABLED);
    }

    /** The binding, made at first use. */
    static LibtorchOneDnn get() {
        LibtorchOneDnn found = instance;
        if (found == null) {
            synchronized (LOCK) {
                if (instance == null) {
                    instance = new LibtorchOneDnn(LibtorchAutocast.library());
                }
                found = instance;
            }
        }
        return found;
    }

    /**
     * Whether libtorch uses oneDNN in this process outside djl-amp's reference passes (which turn
     * it off for a while): the process's setting, what training runs. Where the switch cannot be
     * reached, true: libtorch's default.
     */
    static boolean usedByTraining() {
        LibtorchOneDnn oneDnn;
        try {
            oneDnn = get();
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            return true;
        }
        synchronized (LOCK) {
            return oneDnn.depth > 0 ? oneDnn.enabledBefore : oneDnn.isEnabled();
        }
    }

    /** Whether libtorch uses oneDNN now. */
    boolean isEnabled() {
        return (isEnabled.invokeInt(new Object[] {context}) & 0xff) != 0;
    }

    /**
     * Turns oneDNN off for the rest of the process, also past a reference pass running meanwhile
     * (which would otherwise put back what it found), and reads the switch back.
     *
     * @return whether libtorch still uses oneDNN: false when it took
     */
    boolean disableForProcess() {
        synchronized (LOCK) {
            if (depth > 0) {
                enabledBefore = false;
            }
            set(false);
            return isEnabled();
        }
    }

    /**
     * Runs {@code computation} with oneDNN off, and puts back what was set before once the last of
     * the overlapping calls ends.
     */
    <T> T withoutOneDnn(Supplier<T> computation) {
        synchronized (LOCK) {
            if (depth++ == 0) {
                enabledBefore = isEnabled();
                set(false);
            }
        }
        try {
            return computation.get();
        } finally {
            synchronized (LOCK) {
                if (--depth == 0) {
                    set(enabledBefore);
                }
            }
        }
    }

    private void set(boolean enabled) {
        setEnabled.invokeVoid(new Object[] {context, enabled});
    }
}
