package io.github.djlamp.amp.capture;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.engine.EngineException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.StepGraph;
import io.github.djlamp.amp.spi.StepGraphs;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The first replay's check on its own, with two arrays standing for a step's state: a "replay" and
 * an "eager step" that each move them by a rate, and a copy that can fail as an allocation on a
 * full device does. The eager step's result must stand in every case, computed from the state as it
 * was before the replay.
 */
class FirstReplayCheckTest {

    private static final float[] FIRST = {1f, 2f, 3f};
    private static final float[] SECOND = {-4f, 5f};

    @Test
    void aReplayThatIsTheStepIsFoundSoAndTheEagerStepStands() {
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            Hooks hooks = new Hooks(manager, Integer.MAX_VALUE);
            FirstReplayCheck.Outcome outcome = check(hooks, manager, 0.5f, 0.5f);
            assertNull(outcome.mismatch());
            assertNull(outcome.unchecked());
            hooks.assertOneStepOf(0.5f);
        }
    }

    @Test
    void aReplayThatMovesTheStateOtherwiseIsFound() {
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            Hooks hooks = new Hooks(manager, Integer.MAX_VALUE);
            FirstReplayCheck.Outcome outcome = check(hooks, manager, 0.25f, 0.5f);
            assertNotNull(outcome.mismatch());
            assertTrue(outcome.mismatch().contains("array 0 of 2"), outcome.mismatch());
            hooks.assertOneStepOf(0.5f);
        }
    }

    /**
     * A copy that fails while the replay's results and the state before it trade places (the second
     * array's): the first array was traded, the second still holds the replay's result. Both must
     * be put back before the eager step, which then runs once from the state as it was.
     */
    @Test
    void aCheckThatCannotHoldItsCopiesRunsTheStepFromTheStateAsItWas() {
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            Hooks hooks = new Hooks(manager, 2); // the second array's first copy
            FirstReplayCheck.Outcome outcome = check(hooks, manager, 0.5f, 0.5f);
            assertNull(outcome.mismatch());
            assertNotNull(outcome.unchecked());
            assertTrue(outcome.unchecked().contains("could not be checked"), outcome.unchecked());
            hooks.assertOneStepOf(0.5f);
        }
    }

    /**
     * A replay the engine fails halfway (it moved the state, then threw): the state goes back from
     * the copy, and the step runs eagerly from the state as it was.
     */
    @Test
    void aReplayTheEngineFailsLeavesTheStepToRunFromTheStateAsItWas() {
        try (NDManager manager = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
            Hooks hooks = new Hooks(manager, Integer.MAX_VALUE);
            StepGraph failing =
                    new StepGraph() {
                        @Override
                        public void replay() {
                            hooks.move(0.5f);
                            throw new EngineException("CUDA error (a test's replay)");
                        }

                        @Override
                        public void close() {}
                    };
            FirstReplayCheck.Outcome outcome =
                    FirstReplayCheck.run(
                            hooks,
                            manager,
                            failing,
                            () -> {
                                hooks.move(0.5f);
                                return new NDList();
                            });
            assertNotNull(outcome.unchecked());
            assertTrue(outcome.unchecked().contains("a test's replay"), outcome.unchecked());
            hooks.assertOneStepOf(0.5f);
        }
    }

    /** The state moves by {@code replayRate} in the replay and by {@code eagerRate} eagerly. */
    private static FirstReplayCheck.Outcome check(
            Hooks hooks, NDManager manager, float replayRate, float eagerRate) {
        StepGraph replay =
                new StepGraph() {
                    @Override
                    public void replay() {
                        hooks.move(replayRate);
                    }

                    @Override
                    public void close() {}
                };
        return FirstReplayCheck.run(
                hooks,
                manager,
                replay,
                () -> {
                    hooks.move(eagerRate);
                    return new NDList();
                });
    }

    /** Two state arrays, and a copy that fails at its {@code failingCall}-th call (from 0). */
    private static final class Hooks implements CaptureHooks {
        private final NDManager manager;
        private final NDArray first;
        private final NDArray second;
        private final int failingCall;
        private final AmpBackend backend = AmpBackends.forEngine("PyTorch");
        private int copies;

        Hooks(NDManager manager, int failingCall) {
            this.manager = manager;
            this.first = manager.create(FIRST);
            this.second = manager.create(SECOND);
            this.failingCall = failingCall;
        }

        /** One step: every value moves by {@code rate} times its own sign. */
        void move(float rate) {
            first.subi(first.sign().mul(manager.full(first.getShape(), rate)));
            second.subi(second.sign().mul(manager.full(second.getShape(), rate)));
        }

        void assertOneStepOf(float rate) {
            try (NDManager expected = manager.newSubManager()) {
                NDArray a = expected.create(FIRST);
                NDArray b = expected.create(SECOND);
                a.subi(a.sign().mul(expected.full(a.getShape(), rate)));
                b.subi(b.sign().mul(expected.full(b.getShape(), rate)));
                assertArrayEquals(a.toFloatArray(), first.toFloatArray(), 0f, "first array");
                assertArrayEquals(b.toFloatArray(), second.toFloatArray(), 0f, "second array");
            }
        }

        @Override
        public Device device() {
            return Device.cpu();
        }

        @Override
        public NDManager manager() {
            return manager;
        }

        @Override
        public StepGraphs graphs() {
            return StepGraphs.unavailable("a test's check without graphs");
        }

        @Override
        public List<String> refusals() {
            return List.of();
        }

        @Override
        public void copy(NDList destinations, NDList sources) {
            if (copies++ == failingCall) {
                throw new EngineException("out of memory (a test's copy)");
            }
            backend.copy(destinations, sources);
        }

        @Override
        public void stateArrays(List<Object> into) {
            into.add(first);
            into.add(second);
        }

        @Override
        public void checkedArrays(List<NDArray> into) {
            into.add(first);
            into.add(second);
        }

        @Override
        public RandomDraws randomDraws() {
            return null;
        }

        @Override
        public void begin() {}

        @Override
        public void step() {}

        @Override
        public void afterReplay() {}

        @Override
        public void afterStep() {}

        @Override
        public void beforeCapture() {}

        @Override
        public void abandonStep() {}

        @Override
        public void end() {}
    }
}
