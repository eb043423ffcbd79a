package io.github.djlamp.amp.it;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.cast.PrecisionSummary;
import io.github.djlamp.amp.policy.LowPrecisionSafe;

/**
 * Child-JVM program for {@link CustomBlockTest}: a user's own {@link AbstractBlock} (a gated linear
 * unit, the DJL idiom for anything not sequential), run once plain in fp32 and once wrapped. Prints
 * both outputs' sums, the share of parameters in 16 bits and "OK" last; djl-amp's warnings reach
 * the output through slf4j-simple.
 *
 * <p>Arguments: {@code read} (the unit, whose forward djl-amp reads as safe), {@code opaque} (the
 * same clipping its output: not readable), {@code marked} (implements {@link LowPrecisionSafe}) or
 * {@code trusted} (the opaque class vouched for in the policy), a policy.
 */
public final class CustomBlockScenario {

    private static final Shape INPUT = new Shape(4, 16);

    private CustomBlockScenario() {}

    /**
     * Runs the scenario.
     *
     * @param args variant and policy
     */
    public static void main(String[] args) {
        if ("trainer".equals(args[0])) {
            trainAsAUserDoes(args[1]);
            return;
        }
        // a class the user cannot change, vouched for in one line at the Amp.wrap call
        String policy =
                "trusted".equals(args[0])
                        ? args[1] + "[class:" + OpaqueGatedUnit.class.getName() + "=trusted]"
                        : args[1];
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            float plain = run(unit(args[0]), null, manager);
            float amp = run(unit(args[0]), policy, manager);
            System.out.println("plain " + plain);
            System.out.println("amp " + amp);
        }
        System.out.println("OK");
    }

    private static Block unit(String variant) {
        switch (variant) {
            case "read":
                return new GatedUnit();
            case "marked":
                return new MarkedGatedUnit();
            default:
                return new OpaqueGatedUnit();
        }
    }

    private static float run(Block block, String policy, NDManager manager) {
        Engine.getInstance().setRandomSeed(5);
        Block model = policy == null ? block : Amp.wrap(block, policy);
        model.initialize(manager, DataType.FLOAT32, INPUT);
        NDArray x = manager.randomNormal(INPUT);
        NDArray y = model.forward(new ParameterStore(manager, false), new NDList(x), false).head();
        if (policy != null) {
            PrecisionSummary summary =
                    ((MixedPrecisionBlock) model).getPrecisionSummary(manager.getDevice(), manager);
            System.out.println("lowShare " + summary.getLowShare());
            System.out.println(
                    "arithmetic "
                            + ((MixedPrecisionBlock) model)
                                    .getArithmeticShare(manager.getDevice()));
        }
        return y.sum().getFloat();
    }

    /**
     * The two lines in a stock DJL program: a trainer initialized before any forward, one epoch of
     * EasyTrain.fit. The fallback WARN must come after the first step, from what it computed.
     */
    private static void trainAsAUserDoes(String policy) {
        Block block =
                new ai.djl.nn.SequentialBlock()
                        .add(new OpaqueGatedUnit())
                        .add(Linear.builder().setUnits(4).build());
        try (ai.djl.Model model = ai.djl.Model.newInstance("gated")) {
            model.setBlock(Amp.wrap(block, policy));
            ai.djl.training.DefaultTrainingConfig config =
                    new ai.djl.training.DefaultTrainingConfig(GcSafe.l2Loss())
                            .optOptimizer(ai.djl.training.optimizer.Optimizer.adam().build())
                            .addTrainingListeners(
                                    ai.djl.training.listener.TrainingListener.Defaults.logging());
            try (ai.djl.training.Trainer trainer =
                    model.newTrainer(Amp.configure(config, model.getBlock()))) {
                trainer.initialize(INPUT);
                System.out.println("initialized");
                NDManager manager = trainer.getManager();
                Engine.getInstance().setRandomSeed(5);
                ai.djl.training.dataset.ArrayDataset data =
                        new ai.djl.training.dataset.ArrayDataset.Builder()
                                .setData(manager.randomNormal(new Shape(16, 16)))
                                .optLabels(manager.randomNormal(new Shape(16, 4)))
                                .setSampling(4, false)
                                .build();
                ai.djl.training.EasyTrain.fit(trainer, 1, data, null);
            } catch (java.io.IOException | ai.djl.translate.TranslateException e) {
                throw new IllegalStateException(e);
            }
        }
        System.out.println("OK");
    }

    /** out = linearA(x) * sigmoid(linearB(x)). */
    static class GatedUnit extends AbstractBlock {
        final Block a;
        final Block b;

        GatedUnit() {
            a = addChildBlock("a", Linear.builder().setUnits(32).build());
            b = addChildBlock("b", Linear.builder().setUnits(32).build());
        }

        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray left = a.forward(store, inputs, training).head();
            NDArray gate = Activation.sigmoid(b.forward(store, inputs, training).head());
            return new NDList(left.mul(gate));
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return a.getOutputShapes(inputShapes);
        }

        @Override
        public void initializeChildBlocks(NDManager manager, DataType dataType, Shape... shapes) {
            a.initialize(manager, dataType, shapes);
            b.initialize(manager, dataType, shapes);
        }
    }

    /**
     * The same unit, clipping its output: djl-amp has not run clip on bf16 arrays, so it cannot
     * read this forward as safe, and the unit runs in fp32.
     */
    static class OpaqueGatedUnit extends GatedUnit {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray out = super.forwardInternal(store, inputs, training, params).head();
            return new NDList(out.clip(-1e4f, 1e4f));
        }
    }

    /** The same unit, declared safe for 16-bit compute by its author. */
    static final class MarkedGatedUnit extends GatedUnit implements LowPrecisionSafe {}
}
