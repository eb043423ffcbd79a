package io.github.djlamp.amp.it;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import ai.djl.util.PairList;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.LowPrecisionSafe;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.spi.AmpBackends;

/**
 * Child-JVM program for {@link TrustedBlockTest}: trains a small model around a user's block that
 * runs in 16 bits on someone's word, with {@code EasyTrain} steps and one inference forward, and
 * prints "step N" after each step and "OK" last. A broken promise under bf16 ends the JVM in DJL's
 * native code before the first "step" line.
 *
 * <p>Arguments: a variant, a policy, the number of steps. Variants: {@code softmax} and {@code
 * ones} (a {@link LowPrecisionSafe} block that breaks its promise: softmax on its bf16 input, or
 * {@code ones(shape, x.getDataType())}), {@code marked} (a well-behaved {@link LowPrecisionSafe}
 * block), {@code trusted} (the same block unmarked, vouched for in the policy with {@code
 * class:...=trusted}), {@code known} (DJL's Conv2d, BatchNorm and Linear only), and the two fixes
 * the breadcrumb names for the softmax block: {@code softmax-fp32} (the policy keeps it in fp32)
 * and {@code cast-softmax} (it casts to fp32 inside, differentiably, before softmax).
 */
public final class TrustedBlockScenario {

    private TrustedBlockScenario() {}

    /**
     * Runs the scenario.
     *
     * @param args variant, policy, steps
     */
    public static void main(String[] args) {
        String variant = args[0];
        String policy = args[1] + overrides(variant);
        int steps = Integer.parseInt(args[2]);
        Engine.getInstance().setRandomSeed(3);
        boolean images = "known".equals(variant);
        Shape input = images ? new Shape(4, 8, 6, 6) : new Shape(4, 8);
        try (Model model = Model.newInstance(variant, "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock wrapped = Amp.wrap(model(variant), policy);
            model.setBlock(wrapped);
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            LossScaling scaling =
                    policy.startsWith("mixed_float16")
                            ? LossScaling.dynamicBuilder().initScale(256f).build()
                            : null;
            try (Trainer trainer = model.newTrainer(Amp.configure(base, wrapped, scaling))) {
                trainer.initialize(input);
                for (int step = 0; step < steps; step++) {
                    NDArray x = data.randomNormal(input);
                    NDArray y =
                            data.randomInteger(0, 3, new Shape(4), DataType.INT32)
                                    .toType(DataType.FLOAT32, false);
                    try (Batch batch =
                            new Batch(
                                    data.newSubManager(),
                                    new NDList(x),
                                    new NDList(y),
                                    4,
                                    Batchifier.STACK,
                                    Batchifier.STACK,
                                    step,
                                    steps)) {
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                    }
                    System.out.println("step " + step);
                }
                try (NDManager eval = data.newSubManager()) {
                    NDArray out = trainer.evaluate(new NDList(eval.randomNormal(input))).head();
                    System.out.println("inference " + out.getShape());
                }
            }
        }
        System.out.println("OK");
    }

    /** The policy's overrides for the variants that need one, as a user writes them. */
    private static String overrides(String variant) {
        switch (variant) {
            case "trusted":
                // a class the user cannot change, vouched for in one line at the Amp.wrap call
                return "[class:" + GatedUnit.class.getName() + "=trusted]";
            case "softmax-fp32":
                // the fix the breadcrumb names first
                return "[class:" + SoftmaxUnit.class.getName() + "=fp32]";
            default:
                return "";
        }
    }

    private static Block model(String variant) {
        switch (variant) {
            case "softmax":
            case "softmax-fp32":
                return around(new SoftmaxUnit());
            case "cast-softmax":
                return around(new CastSoftmaxUnit());
            case "ones":
                return around(new OnesUnit());
            case "marked":
                return around(new MarkedGatedUnit());
            case "trusted":
                return around(new GatedUnit());
            case "known":
                return new SequentialBlock()
                        .add(
                                Conv2d.builder()
                                        .setKernelShape(new Shape(3, 3))
                                        .optPadding(new Shape(1, 1))
                                        .setFilters(8)
                                        .build())
                        .add(BatchNorm.builder().build())
                        .add(Activation.reluBlock())
                        .add(Blocks.batchFlattenBlock())
                        .add(Linear.builder().setUnits(3).build());
            default:
                throw new IllegalArgumentException("unknown variant " + variant);
        }
    }

    /** The user's block between two of DJL's linear layers: its path is 02 and its class name. */
    private static Block around(Block userBlock) {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(userBlock)
                .add(Linear.builder().setUnits(3).build());
    }

    /** A user block with one linear child whose forward is the subclass's. */
    abstract static class UserBlock extends AbstractBlock {
        final Block linear;

        UserBlock() {
            linear = addChildBlock("linear", Linear.builder().setUnits(16).build());
        }

        @Override
        public Shape[] getOutputShapes(Shape[] inputShapes) {
            return linear.getOutputShapes(inputShapes);
        }

        @Override
        public void initializeChildBlocks(NDManager manager, DataType dataType, Shape... shapes) {
            linear.initialize(manager, dataType, shapes);
        }
    }

    /** Breaks the promise of LowPrecisionSafe: softmax on its (bf16) linear output. */
    static final class SoftmaxUnit extends UserBlock implements LowPrecisionSafe {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            return new NDList(linear.forward(store, inputs, training).head().softmax(-1));
        }
    }

    /** Keeps the promise the way the breadcrumb says: casts to fp32 before softmax. */
    static final class CastSoftmaxUnit extends UserBlock implements LowPrecisionSafe {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray x = linear.forward(store, inputs, training).head();
            NDManager manager = x.getManager();
            NDArray fp32 = AmpBackends.forManager(manager).cast(x, Precision.FP32, manager);
            return new NDList(fp32.softmax(-1));
        }
    }

    /** Breaks the promise of LowPrecisionSafe: passes its input's data type to DJL. */
    static final class OnesUnit extends UserBlock implements LowPrecisionSafe {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray x = linear.forward(store, inputs, training).head();
            return new NDList(x.add(x.getManager().ones(x.getShape(), x.getDataType())));
        }
    }

    /** out = linear(x) * sigmoid(linear(x)): safe on bf16 arrays, but djl-amp cannot tell. */
    static class GatedUnit extends UserBlock {
        @Override
        protected NDList forwardInternal(
                ParameterStore store,
                NDList inputs,
                boolean training,
                PairList<String, Object> params) {
            NDArray x = linear.forward(store, inputs, training).head();
            return new NDList(x.mul(Activation.sigmoid(x)));
        }
    }

    /** The same unit, declared safe by its author. */
    static final class MarkedGatedUnit extends GatedUnit implements LowPrecisionSafe {}
}
