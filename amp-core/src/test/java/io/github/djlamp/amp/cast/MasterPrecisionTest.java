package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.core.Linear;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** 16-bit master weights ({@code model.setDataType(FLOAT16)}) are refused, naming the fix. */
class MasterPrecisionTest {

    @ParameterizedTest
    @EnumSource(
            value = DataType.class,
            names = {"FLOAT16", "BFLOAT16"})
    void initializingIn16BitsIsRefused(DataType type) {
        MixedPrecisionBlock block =
                new MixedPrecisionBlock(
                        Linear.builder().setUnits(2).build(), PrecisionPolicy.mixedFloat16());
        AmpException e =
                assertThrows(
                        AmpException.class, () -> block.initialize(null, type, new Shape(1, 4)));
        assertTrue(e.getMessage().contains("fp32 master weights"), e.getMessage());
        assertTrue(e.getMessage().contains("model.setDataType"), e.getMessage());
    }
}
