package io.github.djlamp.amp.cast;

import ai.djl.engine.Engine;
import ai.djl.pytorch.jni.LibUtils;
import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.nio.file.Path;

/**
 * Test aid: switches libtorch's use of oneDNN (mkldnn) off and on, through JNA, as PyTorch's {@code
 * torch.backends.mkldnn.enabled} does. With it off, libtorch runs an LSTM with its own kernels,
 * which accept bf16 and fp16 on a CPU without AVX512-BF16, where oneDNN's LSTM primitive cannot be
 * created: the 16-bit path of a model around an LSTM can then be exercised here.
 */
final class OneDnnSwitch {

    private OneDnnSwitch() {}

    /**
     * Sets the switch.
     *
     * @return what it was before (off where djl-amp turned it off: a hidden cache topology)
     */
    static boolean setEnabled(boolean enabled) {
        Engine.getEngine("PyTorch");
        Path file = Path.of(LibUtils.getLibtorchPath()).resolve(System.mapLibraryName("torch_cpu"));
        NativeLibrary library = NativeLibrary.getInstance(file.toString());
        Pointer context =
                library.getFunction("_ZN2at13globalContextEv").invokePointer(new Object[0]);
        Function get = library.getFunction("_ZNK2at7Context17userEnabledMkldnnEv");
        boolean before = (get.invokeInt(new Object[] {context}) & 0xff) != 0;
        Function set = library.getFunction("_ZN2at7Context20setUserEnabledMkldnnEb");
        set.invokeVoid(new Object[] {context, enabled});
        return before;
    }
}
