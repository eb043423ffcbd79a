package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * How the probe reads oneDNN's verbose lines: the ISA header where oneDNN printed it, else the ISA
 * in its kernels' names; nothing read is never taken as the cap having taken.
 */
class OneDnnIsaProbeTest {

    private static OneDnnIsaProbe.Seen seen(String... lines) {
        return new OneDnnIsaProbe.Seen(List.of(lines));
    }

    @Test
    void theHeaderNamesTheIsaInForce() {
        String avx512 =
                "onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with float16, Intel DL Boost and"
                        + " bfloat16 support";
        assertFalse(seen(avx512).runsAtMost("AVX2"));
        assertTrue(seen(avx512).runsAtMost("AVX512_CORE_BF16"));
        assertTrue(seen("onednn_verbose,v1,info,cpu,isa:Intel AVX2").runsAtMost("AVX2"));
        assertFalse(seen("onednn_verbose,v1,info,cpu,isa:Intel AVX2").runsAtMost("AVX"));
        assertTrue(seen("onednn_verbose,v1,info,cpu,isa:Intel AVX").runsAtMost("avx"));
    }

    @Test
    void withoutTheHeaderTheKernelsNamesSay() {
        String brgemm =
                "onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core,"
                        + "forward_training,src:f32,,,4x8x16x16,0.1";
        assertFalse(seen(brgemm).runsAtMost("AVX2"));
        String jit =
                "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,"
                        + "src:f32,,,4x8x16x16,0.1";
        assertTrue(seen(jit).runsAtMost("AVX2"));
    }

    @Test
    void nothingReadIsNotTakenAsACapInForce() {
        assertFalse(seen().runsAtMost("AVX2"));
        assertFalse(seen("probe failed: no libtorch").runsAtMost("AVX2"));
    }
}
