package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.engine.Engine;
import ai.djl.modality.rl.ActionSpace;
import ai.djl.modality.rl.agent.QAgent;
import ai.djl.modality.rl.env.RlEnv;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.Trainer;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.optimizer.Adam;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * DJL's reinforcement-learning agents train under djl-amp: {@code QAgent.trainBatch} runs one
 * forward and backward per step and notifies the listeners with a null batch (DJL's TrainTicTacToe,
 * with the two djl-amp lines and synthetic games of its shapes).
 */
class ReinforcementLearningAgentTest {

    private static final int GAMES = 6;
    private static final int STEPS_PER_GAME = 3;

    /** TrainTicTacToe's network: board, turn and action concatenated, then an MLP to one value. */
    private static Block ticTacToeBlock() {
        return new SequentialBlock()
                .add(
                        arrays -> {
                            NDArray board = arrays.get(0);
                            NDArray turn = arrays.get(1).reshape(-1, 1);
                            NDArray action = arrays.get(2).reshape(-1, 1);
                            NDArray combined = NDArrays.concat(new NDList(board, turn, action), 1);
                            return new NDList(combined.toType(DataType.FLOAT32, true));
                        })
                .add(new Mlp(11, 1, new int[] {20, 10}));
    }

    @Test
    void qAgentTrainsUnderMixedFloat16WithLossScaling() {
        Engine.getInstance().setRandomSeed(30);
        try (Model model = Model.newInstance("tic-tac-toe", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(ticTacToeBlock(), "mixed_float16");
            model.setBlock(block);
            // TrainTicTacToe's Loss.l2Loss() in its GC-safe form (the same math): the assertions
            // read skipped steps and weights, which a collection before backward would change
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(GcSafe.l2Loss())
                            .addTrainingListeners(TrainingListener.Defaults.basic())
                            .optOptimizer(
                                    Adam.builder()
                                            .optLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer =
                            model.newTrainer(
                                    Amp.configure(
                                            config,
                                            block,
                                            LossScaling.dynamicBuilder().initScale(256).build()));
                    NDManager games = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(1, 9), new Shape(1), new Shape(1));
                trainer.notifyListeners(listener -> listener.onTrainingBegin(trainer));
                List<float[]> before = RealProgramsRig.values(block);

                QAgent agent = new QAgent(trainer, 0.9f);
                Random random = new Random(30);
                for (int game = 0; game < GAMES; game++) {
                    agent.trainBatch(steps(games, random));
                    trainer.step();
                }
                trainer.notifyListeners(listener -> listener.onEpoch(trainer));

                LossScaler scaler = AmpSession.of(trainer).getScaler();
                assertTrue(scaler.getConfig().isEnabled(), "fp16 scales the loss");
                assertEquals(GAMES, scaler.getSteps(), "one checked step per trainBatch");
                assertEquals(0, scaler.getSkippedSteps(), "no overflow at this scale");
                List<float[]> after = RealProgramsRig.values(block);
                boolean moved = false;
                for (int i = 0; i < before.size(); i++) {
                    for (int j = 0; j < before.get(i).length; j++) {
                        assertTrue(Float.isFinite(after.get(i)[j]), "finite weights");
                        moved |= before.get(i)[j] != after.get(i)[j];
                    }
                }
                assertTrue(moved, "the agent's updates reach the weights");
            }
        }
    }

    /** One synthetic game: its steps with TicTacToe's shapes (int board, turn and action). */
    private static RlEnv.Step[] steps(NDManager manager, Random random) {
        RlEnv.Step[] steps = new RlEnv.Step[STEPS_PER_GAME];
        for (int i = 0; i < steps.length; i++) {
            steps[i] = new SyntheticStep(manager, random, i == steps.length - 1);
        }
        return steps;
    }

    /** A move of a game of TicTacToe's shapes: random board, one action, a reward at the end. */
    private static final class SyntheticStep implements RlEnv.Step {
        private final NDManager manager;
        private final Random random;
        private final boolean done;

        SyntheticStep(NDManager manager, Random random, boolean done) {
            this.manager = manager;
            this.random = random;
            this.done = done;
        }

        private NDList observation() {
            int[] board = new int[9];
            for (int i = 0; i < board.length; i++) {
                board[i] = random.nextInt(3) - 1;
            }
            return new NDList(manager.create(board), manager.create(random.nextInt(2) * 2 - 1));
        }

        @Override
        public NDList getPreObservation() {
            return observation();
        }

        @Override
        public NDList getAction() {
            return new NDList(manager.create(random.nextInt(9)));
        }

        @Override
        public NDList getPostObservation() {
            return observation();
        }

        @Override
        public ActionSpace getPostActionSpace() {
            ActionSpace space = new ActionSpace();
            for (int i = 0; i < 3; i++) {
                space.add(new NDList(manager.create(random.nextInt(9))));
            }
            return space;
        }

        @Override
        public NDArray getReward() {
            return manager.create(done ? 1f : 0f);
        }

        @Override
        public boolean isDone() {
            return done;
        }

        @Override
        public void close() {}
    }
}
