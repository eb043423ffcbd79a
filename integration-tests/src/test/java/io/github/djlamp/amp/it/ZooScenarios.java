package io.github.djlamp.amp.it;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.basicmodelzoo.basic.Mlp;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.basicmodelzoo.cv.classification.SqueezeNet;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.transformer.BertBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.CastCategory;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Child-JVM program for {@link ModelZooNoCrashTest}: builds one of DJL's model-zoo or transformer
 * blocks, wraps it, and runs training steps (forward, backward, the AMP check, the optimizer) and
 * an inference forward through djl-amp. Prints what it did and "OK" last; a native crash ends the
 * JVM before that line.
 *
 * <p>Arguments: a model name ({@link #model}), a policy string, and the number of steps.
 */
public final class ZooScenarios {

    private ZooScenarios() {}

    /**
     * Runs one scenario.
     *
     * @param args model, policy, steps; or {@code crash} to kill the JVM through DJL on purpose
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 1 && "crash".equals(args[0])) {
            try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
                System.out.println("about to pass DataType.BFLOAT16 to DJL's JNI");
                System.out.flush();
                manager.zeros(new Shape(2), DataType.BFLOAT16);
            }
            System.out.println("OK");
            return;
        }
        String name = args[0];
        String policy = args[1];
        int steps = Integer.parseInt(args[2]);
        Engine.getInstance().setRandomSeed(1);
        Scenario scenario = model(name);
        if (PLAIN_DJL.equals(policy)) {
            trainPlainDjl(name, scenario, steps);
            System.out.println("OK");
            return;
        }
        try (Model model = Model.newInstance(name, "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            MixedPrecisionBlock wrapped = Amp.wrap(scenario.block, policy);
            model.setBlock(wrapped);
            DefaultTrainingConfig base =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            // a modest initial scale so that fp16 steps are applied, not skipped for overflow
            PrecisionPolicy concrete = wrapped.resolvePolicy(Device.cpu(), model.getNDManager());
            LossScaling scaling =
                    concrete.getComputePrecision().needsLossScaling()
                            ? LossScaling.dynamicBuilder().initScale(256f).build()
                            : null;
            try (Trainer trainer = model.newTrainer(Amp.configure(base, wrapped, scaling))) {
                trainer.initialize(scenario.inputShapes);
                System.out.println(
                        name + " under " + concrete + ": " + categories(wrapped, concrete));
                float before = checksum(wrapped);
                trainSteps(trainer, scenario, data, steps);
                LossScaler scaler = AmpSession.of(trainer).getScaler();
                float after = checksum(wrapped);
                System.out.printf(
                        "%d steps, %d skipped, scale %s; weight checksum %s -> %s%n",
                        scaler.getSteps(),
                        scaler.getSkippedSteps(),
                        scaler.getScale(),
                        before,
                        after);
                require(scaler.getSteps() == steps, "every step counted");
                require(Float.isFinite(after), "weights finite");
                require(
                        scaler.getSkippedSteps() == steps || after != before,
                        "an applied step changed the weights");
                try (NDManager eval = data.newSubManager()) {
                    NDList x = scenario.inputs.apply(eval);
                    NDArray out = trainer.evaluate(x).head();
                    require(out.getDataType() == DataType.FLOAT32, "fp32 output: " + out);
                    require(Float.isFinite(out.abs().sum().getFloat()), "finite inference output");
                    System.out.println("inference output " + out.getShape() + " fp32");
                }
            }
        }
        System.out.println("OK");
    }

    /** The policy argument that trains the model with plain DJL in fp32, without djl-amp. */
    static final String PLAIN_DJL = "plain-djl-fp32";

    /**
     * Trains and runs the model exactly as a DJL program without djl-amp would: what tells a
     * platform's defect (plain DJL dies too) from djl-amp's.
     */
    private static void trainPlainDjl(String name, Scenario scenario, int steps) {
        try (Model model = Model.newInstance(name, "PyTorch");
                NDManager data = NDManager.newBaseManager("PyTorch")) {
            model.setBlock(scenario.block);
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer = model.newTrainer(config)) {
                trainer.initialize(scenario.inputShapes);
                trainSteps(trainer, scenario, data, steps);
                NDArray out = trainer.evaluate(scenario.inputs.apply(data)).head();
                require(Float.isFinite(out.abs().sum().getFloat()), "finite inference output");
                System.out.println(name + ": " + steps + " plain DJL fp32 steps and inference");
            }
        }
    }

    /** Random batches of the scenario's shapes, each one EasyTrain step. */
    private static void trainSteps(Trainer trainer, Scenario scenario, NDManager data, int steps) {
        for (int step = 0; step < steps; step++) {
            NDList x = scenario.inputs.apply(data);
            NDArray y =
                    data.randomInteger(
                                    0,
                                    scenario.classes,
                                    new Shape(scenario.inputShapes[0].get(0)),
                                    DataType.INT32)
                            .toType(DataType.FLOAT32, false);
            Batch batch =
                    new Batch(
                            data.newSubManager(),
                            x,
                            new NDList(y),
                            (int) y.size(),
                            Batchifier.STACK,
                            Batchifier.STACK,
                            step,
                            steps);
            EasyTrain.trainBatch(trainer, batch);
            trainer.step();
            batch.close();
        }
    }

    /** The blocks under test, each small enough for fp16 on a CPU. */
    static Scenario model(String name) {
        switch (name) {
            case "resnet20":
                return images(
                        ResNetV1.builder()
                                .setImageShape(new Shape(3, 16, 16))
                                .setNumLayers(20)
                                .setOutSize(10)
                                .build(),
                        new Shape(4, 3, 16, 16),
                        10);
            case "resnet18":
                return images(
                        ResNetV1.builder()
                                .setImageShape(new Shape(3, 32, 32))
                                .setNumLayers(18)
                                .setOutSize(10)
                                .build(),
                        new Shape(4, 3, 32, 32),
                        10);
            case "resnet50":
                return images(
                        ResNetV1.builder()
                                .setImageShape(new Shape(3, 32, 32))
                                .setNumLayers(50)
                                .setOutSize(10)
                                .build(),
                        new Shape(2, 3, 32, 32),
                        10);
            case "mlp":
                return images(new Mlp(64, 10, new int[] {32, 16}), new Shape(8, 64), 10);
            case "transformer":
                return images(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(32).build())
                                .add(new TransformerEncoderBlock(32, 4, 64, 0.1f, Activation::gelu))
                                .add(Blocks.batchFlattenBlock())
                                .add(Linear.builder().setUnits(3).build()),
                        new Shape(4, 6, 8),
                        3);
            case "bert":
                return bert();
            case "lstm":
                return images(
                        new SequentialBlock()
                                .add(
                                        LSTM.builder()
                                                .setStateSize(16)
                                                .setNumLayers(1)
                                                .optBatchFirst(true)
                                                .optReturnState(false)
                                                .build())
                                .add(Blocks.batchFlattenBlock())
                                .add(Linear.builder().setUnits(3).build()),
                        new Shape(4, 5, 8),
                        3);
            case "softmax-lambda":
                // a user lambda that calls softmax: bf16 would terminate the JVM in DJL 0.35.1
                return images(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(16).build())
                                .add(new LambdaBlock(x -> new NDList(x.head().softmax(1))))
                                .add(Linear.builder().setUnits(3).build()),
                        new Shape(4, 8),
                        3);
            case "named-softmax-lambda":
                // the same lambda under DJL's name for ReLU: trusted by its name, it ended the JVM
                return images(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(16).build())
                                .add(new LambdaBlock(x -> new NDList(x.head().softmax(1)), "ReLU"))
                                .add(Linear.builder().setUnits(3).build()),
                        new Shape(4, 8),
                        3);
            case "softmax-join":
                // an attention-like ParallelBlock join: softmax on bf16 would terminate the JVM
                return images(
                        joined(
                                list ->
                                        new NDList(
                                                list.get(0)
                                                        .head()
                                                        .add(list.get(1).head())
                                                        .softmax(1))),
                        new Shape(4, 8),
                        3);
            case "ones-join":
                // a join that builds a mask of its input's data type: bf16 reads back as UNKNOWN
                return images(
                        joined(
                                list -> {
                                    NDArray a = list.get(0).head();
                                    NDArray mask =
                                            a.getManager().ones(a.getShape(), a.getDataType());
                                    return new NDList(a.mul(mask).add(list.get(1).head()));
                                }),
                        new Shape(4, 8),
                        3);
            case "squeezenet":
                return images(SqueezeNet.squeezenet(10), new Shape(2, 3, 64, 64), 10);
            default:
                throw new IllegalArgumentException("no scenario " + name);
        }
    }

    private static Block joined(Function<List<NDList>, NDList> join) {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(16).build())
                .add(
                        new ParallelBlock(
                                join,
                                List.of(
                                        Linear.builder().setUnits(8).build(),
                                        Linear.builder().setUnits(8).build())))
                .add(Linear.builder().setUnits(3).build());
    }

    private static Scenario images(Block block, Shape shape, int classes) {
        return new Scenario(
                block, new Shape[] {shape}, m -> new NDList(m.randomNormal(shape)), classes);
    }

    private static Scenario bert() {
        int batch = 4;
        int length = 8;
        Block bert =
                BertBlock.builder()
                        .setTokenDictionarySize(50)
                        .optTypeDictionarySize(2)
                        .optEmbeddingSize(32)
                        .optTransformerBlockCount(2)
                        .optAttentionHeadCount(4)
                        .optHiddenSize(64)
                        .optMaxSequenceLength(length)
                        .build();
        Block head =
                new SequentialBlock()
                        .add(bert)
                        .add(list -> new NDList(list.get(1))) // the pooled output
                        .add(Linear.builder().setUnits(2).build());
        Shape ids = new Shape(batch, length);
        return new Scenario(
                head,
                new Shape[] {ids, ids, ids},
                m ->
                        new NDList(
                                m.randomInteger(0, 50, ids, DataType.INT32),
                                m.randomInteger(0, 2, ids, DataType.INT32),
                                m.ones(ids, DataType.INT32)),
                2);
    }

    private static String categories(MixedPrecisionBlock wrapped, PrecisionPolicy concrete) {
        Map<CastCategory, Integer> counts = new EnumMap<>(CastCategory.class);
        for (CastCategory c : concrete.resolveAll(wrapped.getOriginal()).values()) {
            counts.merge(c, 1, Integer::sum);
        }
        return "blocks by category " + counts;
    }

    private static float checksum(Block block) {
        float sum = 0;
        for (var p : block.getParameters()) {
            sum += Arrays.stream(toDoubles(p.getValue().getArray().toFloatArray())).sum();
        }
        return sum;
    }

    private static double[] toDoubles(float[] values) {
        double[] d = new double[values.length];
        for (int i = 0; i < values.length; i++) {
            d[i] = Math.abs(values[i]);
        }
        return d;
    }

    private static void require(boolean condition, String what) {
        if (!condition) {
            System.out.println("FAILED: " + what);
            System.exit(3);
        }
    }

    /** A block, its input shapes, an input generator and the number of classes. */
    static final class Scenario {
        final Block block;
        final Shape[] inputShapes;
        final Function<NDManager, NDList> inputs;
        final int classes;

        Scenario(
                Block block, Shape[] inputShapes, Function<NDManager, NDList> inputs, int classes) {
            this.block = block;
            this.inputShapes = inputShapes;
            this.inputs = inputs;
            this.classes = classes;
        }
    }
}
