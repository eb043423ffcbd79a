package io.github.djlamp.amp.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.djl.Model;
import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.GradientCollector;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A loop as d2l-java's seq2seq chapters write it: no {@code trainer.initialize}, the forward on a
 * parameter store of its own ({@code net.forward(new ParameterStore(manager, false), ...)}), then
 * {@code trainer.step()}. DJL's step updates only the parameters its own store holds, and in such a
 * loop only DJL's first-step gradient check puts them there; djl-amp had turned that check off, so
 * the parameters never moved and the loss stood still, with no word.
 */
class OwnStoreLoopTest {

    private static final int STEPS = 3;

    @Test
    void theWrappersForwardOnAStoreOfItsOwnTrainsAsPlainDjl() {
        List<float[]> plain = train(null, true);
        List<float[]> amp = train("float32", true);
        for (int i = 0; i < plain.size(); i++) {
            assertArrayEquals(plain.get(i), amp.get(i), 1e-6f, "parameter " + i);
        }
    }

    /**
     * The book's own variable, the block that was wrapped, called directly: the model trains as
     * plain DJL (in fp32, djl-amp not in the forward), and djl-amp says so once.
     */
    @Test
    void theWrappedBlockCalledDirectlyTrainsAndIsNamed() {
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        List<float[]> amp;
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            amp = train("float32", false);
        } finally {
            System.setErr(err);
        }
        String log = captured.toString(StandardCharsets.UTF_8);
        System.err.print(log);
        List<float[]> plain = train(null, false);
        for (int i = 0; i < plain.size(); i++) {
            assertArrayEquals(plain.get(i), amp.get(i), 1e-6f, "parameter " + i);
        }
        assertEquals(
                1, log.lines().filter(l -> l.contains("no training forward of the")).count(), log);
    }

    /**
     * Trains an Mlp for {@link #STEPS} steps as d2l-java's loop does and returns its parameters;
     * plain DJL for a null policy. {@code throughWrapper}: the forward calls the wrapper (else the
     * block that was wrapped).
     */
    private static List<float[]> train(String policy, boolean throughWrapper) {
        Engine.getInstance().setRandomSeed(3);
        Block net = new Mlp(6, 3, new int[] {8});
        try (Model model = Model.newInstance("d2l-style", "PyTorch");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock wrapped = policy == null ? null : Amp.wrap(net, policy);
            model.setBlock(wrapped == null ? net : wrapped);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.1f))
                                            .build());
            Block called = wrapped != null && throughWrapper ? wrapped : net;
            try (Trainer trainer =
                    model.newTrainer(wrapped == null ? config : Amp.configure(config, wrapped))) {
                NDArray x = manager.randomNormal(new Shape(4, 6));
                NDArray y = manager.randomNormal(new Shape(4, 3));
                for (int step = 0; step < STEPS; step++) {
                    try (GradientCollector collector =
                            Engine.getInstance().newGradientCollector()) {
                        NDArray out =
                                called.forward(
                                                new ParameterStore(manager, false),
                                                new NDList(x),
                                                true,
                                                null)
                                        .head();
                        collector.backward(Loss.l2Loss().evaluate(new NDList(y), new NDList(out)));
                    }
                    trainer.step();
                }
            }
            List<float[]> values = new ArrayList<>();
            for (Pair<String, Parameter> pair : net.getParameters()) {
                values.add(pair.getValue().getArray().toFloatArray());
            }
            return values;
        }
    }
}
