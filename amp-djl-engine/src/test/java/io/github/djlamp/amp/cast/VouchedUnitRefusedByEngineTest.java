package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import org.junit.jupiter.api.Test;

/**
 * A unit run in 16 bits on someone's word whose own code makes an fp32 array and multiplies it with
 * the 16-bit input (DJL's DeepAR does, trusted under float16: "mat1 and mat2 must have the same
 * dtype") fails with a message that names the unit, why it ran in 16 bits and the override that
 * keeps it in fp32; the engine's exception stays attached as the cause.
 */
class VouchedUnitRefusedByEngineTest {

    @Test
    void theEnginesRefusalOfALowPrecisionSafeUnitNamesItAndTheFix() {
        String message = refusal(new SafeOnItsWord(), "mixed_float16");
        assertTrue(message.contains("in float16 because it implements LowPrecisionSafe"), message);
        assertTrue(message.contains("class:" + SafeOnItsWord.class.getName() + "=fp32"), message);
    }

    @Test
    void theEnginesRefusalOfATrustedUnitNamesItAndTheFix() {
        String policy = "mixed_float16[class:" + TrustedByPolicy.class.getName() + "=trusted]";
        String message = refusal(new TrustedByPolicy(), policy);
        assertTrue(message.contains("in float16 because the policy trusts it"), message);
        assertTrue(message.contains("class:" + TrustedByPolicy.class.getName() + "=fp32"), message);
    }

    private static String refusal(AbstractBlock unit, String policy) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(1);
            SequentialBlock model =
                    new SequentialBlock().add(Linear.builder().setUnits(4).build()).add(unit);
            MixedPrecisionBlock wrapped = Amp.wrap(model, policy);
            wrapped.initialize(manager, DataType.FLOAT32, new Shape(2, 3));
            NDList input = new NDList(manager.ones(new Shape(2, 3)));
            ParameterStore store = new ParameterStore(manager, false);
            AmpException e =
                    assertThrows(AmpException.class, () -> wrapped.forward(store, input, true));
            String message = e.getMessage();
            String name = unit.getClass().getSimpleName();
            assertTrue(message.startsWith("'02" + name + "' ("), message);
            assertTrue(e.getCause() instanceof EngineException, message);
            // the engine said the types differ: the message says so, not a guess between two causes
            assertTrue(
                    message.contains(
                            ". Its own code mixes arrays of its own with the 16-bit ones."),
                    message);
            return message;
        }
    }

    /** Multiplies its input by an fp32 matrix of its own: wrong for a 16-bit input. */
    private abstract static class OwnFp32Product extends AbstractBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray x = inputs.singletonOrThrow();
            NDArray own = x.getManager().ones(new Shape(x.getShape().get(1), 2), DataType.FLOAT32);
            return new NDList(x.matMul(own));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return new Shape[] {new Shape(inputShapes[0].get(0), 2)};
        }
    }

    /** Says it is safe in 16 bits. */
    private static final class SafeOnItsWord extends OwnFp32Product implements LowPrecisionSafe {}

    /** Trusted by an override of the policy. */
    private static final class TrustedByPolicy extends OwnFp32Product {}
}
