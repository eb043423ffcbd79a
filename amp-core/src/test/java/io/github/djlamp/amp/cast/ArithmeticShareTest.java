package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.github.djlamp.amp.policy.Precision;
import org.junit.jupiter.api.Test;

/** The share of a forward's arithmetic in 16 bits, as the epoch line and the bench report it. */
class ArithmeticShareTest {

    @Test
    void theShareCountsWhatRanInTheSixteenBitPrecision() {
        ArithmeticShare share = new ArithmeticShare(Precision.BF16);
        share.recordProduct("01Linear", "(matmul)", Precision.BF16, 3000);
        share.recordProduct("02Linear", "(matmul)", Precision.FP32, 1000);
        assertEquals(0.75, share.getLowShare(), 1e-12);
        assertEquals("75.0% of 4.00 kFLOP a forward in bfloat16", share.toString());
    }

    /** Under the float32 policy nothing runs in 16 bits: not "100%" of it. */
    @Test
    void aFloat32RunHasNoSixteenBitShare() {
        ArithmeticShare share = new ArithmeticShare(Precision.FP32);
        share.recordProduct("01Linear", "(matmul)", Precision.FP32, 4000);
        assertEquals(0, share.getLowShare(), 0);
        assertFalse(share.isMostlyFp32(), "no fallback to warn about under float32");
        assertEquals("4.00 kFLOP a forward, all in float32", share.toString());
    }
}
