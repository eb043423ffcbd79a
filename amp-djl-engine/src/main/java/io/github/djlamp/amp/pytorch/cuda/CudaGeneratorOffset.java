package io.github.djlamp.amp.pytorch.cuda;

import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import io.github.djlamp.amp.exception.AmpException;
import java.util.Optional;
import java.util.Set;

/**
 * Where libtorch's default CUDA generator of a device stands: its Philox offset, read and set
 * between steps ({@code at::cuda::detail::getDefaultCUDAGenerator}, {@code
 * CUDAGeneratorImpl::get_offset} and {@code set_offset}). A replay of a captured step draws its
 * random numbers from that offset and moves it on by what the step draws, as an eager step does;
 * setting it back between the two makes them draw the same (dropout's masks).
 *
 * <p>Both members throw a C++ exception while the thread's stream captures, which through JNA would
 * end the JVM: they are called between steps only. {@code set_offset} throws for an offset that is
 * not a multiple of 4, so such an offset is refused here first (libtorch's own offsets always are).
 */
public final class CudaGeneratorOffset {

    static final String DEFAULT_GENERATOR = "_ZN2at4cuda6detail23getDefaultCUDAGeneratorEa";
    static final String GET_OFFSET = "_ZNK2at17CUDAGeneratorImpl10get_offsetEv";
    static final String SET_OFFSET = "_ZN2at17CUDAGeneratorImpl10set_offsetEm";

    private final NativeLibrary torchCuda;

    private CudaGeneratorOffset(NativeLibrary torchCuda) {
        this.torchCuda = torchCuda;
    }

    /** The binding, where libtorch_cuda defines all three entry points. */
    static Optional<CudaGeneratorOffset> in(NativeLibrary torchCuda, Set<String> defined) {
        if (defined.contains(DEFAULT_GENERATOR)
                && defined.contains(GET_OFFSET)
                && defined.contains(SET_OFFSET)) {
            return Optional.of(new CudaGeneratorOffset(torchCuda));
        }
        return Optional.empty();
    }

    /**
     * Returns the offset of a device's default generator.
     *
     * @param deviceIndex the CUDA device
     * @return the offset
     */
    public long get(int deviceIndex) {
        return torchCuda.getFunction(GET_OFFSET).invokeLong(new Object[] {generator(deviceIndex)});
    }

    /**
     * Sets the offset of a device's default generator.
     *
     * @param deviceIndex the CUDA device
     * @param offset an offset {@link #get} returned
     * @throws AmpException when the offset is not a multiple of 4
     */
    public void set(int deviceIndex, long offset) {
        if (offset % 4 != 0) {
            throw new AmpException(
                    "A CUDA generator's offset must be a multiple of 4, got "
                            + offset
                            + ": only an offset read from the generator can be set back");
        }
        torchCuda.getFunction(SET_OFFSET).invokeVoid(new Object[] {generator(deviceIndex), offset});
    }

    /**
     * The generator's implementation: {@code getDefaultCUDAGenerator} returns a reference to an
     * {@code at::Generator}, whose one member is the {@code intrusive_ptr} to it.
     */
    private Pointer generator(int deviceIndex) {
        Pointer generator =
                torchCuda
                        .getFunction(DEFAULT_GENERATOR)
                        .invokePointer(new Object[] {(byte) deviceIndex});
        return generator.getPointer(0);
    }
}
