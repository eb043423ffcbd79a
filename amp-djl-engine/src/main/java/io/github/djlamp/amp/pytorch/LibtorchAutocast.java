package io.github.djlamp.amp.pytorch;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.LibUtils;
import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Supplier;

/**
 * libtorch's own autocast ({@code at::autocast}), called through JNA in {@code libtorch_cpu}: DJL's
 * JNI has no entry for it. The state is the calling thread's, as PyTorch's {@code torch.autocast}
 * is; {@link #run} turns it on around one computation and puts back what was there on every way
 * out, so that uses nest.
 *
 * <p>The C++ functions are found by their Itanium-mangled names (Linux and macOS builds of
 * libtorch); where they are missing, {@link #isAvailable()} is false and nothing calls them.
 */
final class LibtorchAutocast {

    // c10::DeviceType and c10::ScalarType codes (c10/core/DeviceType.h, ScalarType.h)
    private static final int DEVICE_CPU = 0;
    private static final int DEVICE_CUDA = 1;
    private static final int SCALAR_HALF = 5;
    private static final int SCALAR_FLOAT = 6;
    private static final int SCALAR_BFLOAT16 = 15;

    private static final String SET_ENABLED =
            "_ZN2at8autocast20set_autocast_enabledEN3c1010DeviceTypeEb";
    private static final String IS_ENABLED =
            "_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE";
    private static final String SET_DTYPE =
            "_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE";
    private static final String GET_DTYPE =
            "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE";
    private static final String CLEAR_CACHE = "_ZN2at8autocast11clear_cacheEv";

    private static volatile LibtorchAutocast instance;
    private static volatile String unavailable;

    private final Function setEnabled;
    private final Function isEnabled;
    private final Function setDtype;
    private final Function getDtype;
    private final Function clearCache;

    private LibtorchAutocast(NativeLibrary library) {
        setEnabled = library.getFunction(SET_ENABLED);
        isEnabled = library.getFunction(IS_ENABLED);
        setDtype = library.getFunction(SET_DTYPE);
        getDtype = library.getFunction(GET_DTYPE);
        clearCache = library.getFunction(CLEAR_CACHE);
    }

    /**
     * Returns the binding, loading it at first use.
     *
     * @throws AmpException naming what is missing when libtorch's autocast cannot be reached
     */
    static LibtorchAutocast get() {
        LibtorchAutocast found = instance;
        if (found != null) {
            return found;
        }
        synchronized (LibtorchAutocast.class) {
            if (instance == null && unavailable == null) {
                try {
                    instance = new LibtorchAutocast(library());
                } catch (UnsatisfiedLinkError | RuntimeException e) {
                    unavailable = e.getMessage();
                }
            }
            if (instance == null) {
                throw new AmpException(
                        "libtorch's autocast (at::autocast in libtorch_cpu) cannot be reached"
                                + " through JNA here ("
                                + unavailable
                                + "): djl-amp runs TorchScript modules and DJL's recurrent blocks"
                                + " in fp32 on this platform; override them as fp32 in the policy"
                                + " to say so");
            }
            return instance;
        }
    }

    /** Returns whether libtorch's autocast can be reached on this platform. */
    static boolean isAvailable() {
        try {
            get();
            return true;
        } catch (AmpException e) {
            return false;
        }
    }

    /** libtorch_cpu, as DJL's engine loaded it (JNA gets the same handle). */
    static NativeLibrary library() {
        Engine.getEngine("PyTorch"); // loads libtorch and tells DJL where it is
        Path dir = Path.of(LibUtils.getLibtorchPath());
        Path file = dir.resolve(System.mapLibraryName("torch_cpu"));
        if (!Files.exists(file)) {
            throw new IllegalStateException("no " + file.getFileName() + " in " + dir);
        }
        // already loaded by DJL's engine: JNA gets the same handle
        return NativeLibrary.getInstance(file.toString());
    }

    /**
     * Runs {@code computation} with autocast on for {@code device}'s type in {@code precision}, and
     * puts back the calling thread's previous state on every way out, the cache of cast weights
     * cleared when autocast goes off (the weights change between steps).
     *
     * @throws AmpException for a device type other than CPU and GPU, or for fp32
     */
    <T> T run(Device device, Precision precision, Supplier<T> computation) {
        int type = deviceType(device);
        int dtype = scalarType(precision);
        boolean wasEnabled = (isEnabled.invokeInt(new Object[] {type}) & 0xff) != 0;
        int previousDtype = getDtype.invokeInt(new Object[] {type});
        setDtype.invokeVoid(new Object[] {type, (byte) dtype});
        setEnabled.invokeVoid(new Object[] {type, (byte) 1});
        try {
            return computation.get();
        } finally {
            setEnabled.invokeVoid(new Object[] {type, (byte) (wasEnabled ? 1 : 0)});
            setDtype.invokeVoid(new Object[] {type, (byte) previousDtype});
            if (!wasEnabled) {
                clearCache.invokeVoid(new Object[0]);
            }
        }
    }

    /** Returns whether autocast is on for {@code device}'s type on the calling thread. */
    boolean isEnabled(Device device) {
        return (isEnabled.invokeInt(new Object[] {deviceType(device)}) & 0xff) != 0;
    }

    /** Returns the precision autocast computes in for {@code device}'s type on this thread. */
    Precision precision(Device device) {
        int dtype = getDtype.invokeInt(new Object[] {deviceType(device)}) & 0xff;
        return switch (dtype) {
            case SCALAR_BFLOAT16 -> Precision.BF16;
            case SCALAR_HALF -> Precision.FP16;
            case SCALAR_FLOAT -> Precision.FP32;
            default -> null;
        };
    }

    private static int deviceType(Device device) {
        if (device.isGpu()) {
            return DEVICE_CUDA;
        }
        if (Device.Type.CPU.equals(device.getDeviceType())) {
            return DEVICE_CPU;
        }
        throw new AmpException(
                "libtorch's autocast is used on CPU and CUDA devices only, not " + device);
    }

    private static int scalarType(Precision precision) {
        return switch (precision) {
            case BF16 -> SCALAR_BFLOAT16;
            case FP16 -> SCALAR_HALF;
            case FP32 ->
                    throw new AmpException(
                            "autocast runs in a 16-bit precision; fp32 needs no autocast");
        };
    }
}
