package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.recurrent.GRU;
import ai.djl.nn.recurrent.LSTM;
import ai.djl.nn.recurrent.RNN;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.Batch;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.translate.Batchifier;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.strategy.AutocastStage;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's recurrent blocks on a GPU: libtorch's CUDA autocast computes cuDNN's recurrent kernel in
 * fp16 whatever precision it is given, so under {@code mixed_bfloat16} djl-amp runs them in fp32
 * and says why, and under {@code mixed_float16} (loss scaling on) in fp16.
 */
class CudaRecurrentAutocastTest {

    private static final int STEPS = 4;

    @Test
    void theBackendRefusesBf16RecurrentAutocastOnAGpuOnly() {
        AmpBackend backend = AmpBackends.forEngine("PyTorch");
        Block lstm = LSTM.builder().setStateSize(8).setNumLayers(1).build();
        Block rnn = RNN.builder().setStateSize(8).setNumLayers(1).build();
        String refusal = backend.engineAutocastRefusal(lstm, Device.gpu(), Precision.BF16);
        assertNotNull(refusal);
        assertTrue(refusal.contains("mixed_float16"), "names the way to 16 bits: " + refusal);
        assertNotNull(backend.engineAutocastRefusal(rnn, Device.gpu(), Precision.BF16));
        assertNull(backend.engineAutocastRefusal(lstm, Device.gpu(), Precision.FP16));
        assertNull(backend.engineAutocastRefusal(lstm, Device.cpu(), Precision.BF16));
        assertNull(backend.engineAutocastRefusal(rnn, Device.cpu(), Precision.FP16));
        // a user's block around a GRU: autocast would reach the GRU inside
        Block around =
                new SequentialBlock()
                        .add(GRU.builder().setStateSize(8).setNumLayers(1).build())
                        .add(Linear.builder().setUnits(2).build());
        assertNotNull(backend.engineAutocastRefusal(around, Device.gpu(), Precision.BF16));
        assertNull(backend.engineAutocastRefusal(around, Device.gpu(), Precision.FP16));
        assertNull(
                backend.engineAutocastRefusal(
                        Linear.builder().setUnits(2).build(), Device.gpu(), Precision.BF16));
    }

    @Test
    void onAGpuBf16RunsTheLstmInFp32AndFp16RunsItInFp16() {
        if (Engine.getEngine("PyTorch").getGpuCount() == 0) {
            System.out.println(
                    "CudaRecurrentAutocastTest: no GPU visible to DJL here; the training runs need"
                            + " one (the refusal itself is tested above)");
            return;
        }
        for (String kind : List.of("LSTM", "RNN")) {
            AutocastStage bf16 = train(lstmOrRnn(kind), "mixed_bfloat16");
            System.out.println(kind + " under mixed_bfloat16 on the GPU: " + bf16.fallbackReason());
            assertNotNull(bf16.fallbackReason(), kind + ": fp32 with the reason");
            assertNull(bf16.lastComputedPrecision(), kind + ": never run under autocast");

            AutocastStage fp16 = train(lstmOrRnn(kind), "mixed_float16");
            System.out.println(
                    kind + " under mixed_float16 on the GPU: " + fp16.lastComputedPrecision());
            assertNull(fp16.fallbackReason(), kind);
            assertEquals(Precision.FP16, fp16.lastComputedPrecision(), kind);
        }
    }

    /** A GRU is not run under autocast by djl-amp (the CPU's autocast keeps it fp32). */
    @Test
    void aGruIsNotAnAutocastBlock() {
        Block gru = GRU.builder().setStateSize(8).setNumLayers(1).build();
        assertTrue(!AmpBackends.forEngine("PyTorch").supportsEngineAutocast(gru));
    }

    private static Block lstm() {
        return LSTM.builder().setStateSize(16).setNumLayers(1).build();
    }

    private static Block rnn() {
        return RNN.builder()
                .setActivation(RNN.Activation.TANH)
                .setStateSize(16)
                .setNumLayers(1)
                .build();
    }

    private static Block lstmOrRnn(String kind) {
        return "LSTM".equals(kind) ? lstm() : rnn();
    }

    /** DJL's MNIST-with-LSTM example's model around {@code recurrent}, a few steps on a GPU. */
    private static AutocastStage train(Block recurrent, String policy) {
        Device gpu = Device.gpu();
        Shape input = new Shape(8, 1, 7, 4);
        SequentialBlock block = EngineAutocastTrainingTest.mnistExampleModel(recurrent);
        Engine.getInstance().setRandomSeed(7);
        MixedPrecisionBlock wrapped = Amp.wrap(block, policy);
        DefaultTrainingConfig config =
                new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                        .optDevices(new Device[] {gpu})
                        .optOptimizer(
                                Optimizer.sgd()
                                        .setLearningRateTracker(Tracker.fixed(0.05f))
                                        .build());
        try (Model model = Model.newInstance("recurrent", gpu, "PyTorch");
                NDManager data = NDManager.newBaseManager(gpu, "PyTorch")) {
            model.setBlock(wrapped);
            try (Trainer trainer = model.newTrainer(Amp.configure(config, wrapped))) {
                trainer.initialize(input);
                NDArray x = data.randomNormal(input);
                NDArray y =
                        data.randomInteger(0, 10, new Shape(8), DataType.INT32)
                                .toType(DataType.FLOAT32, false);
                for (int step = 0; step < STEPS; step++) {
                    try (NDManager stepManager = data.newSubManager()) {
                        NDArray xs = x.duplicate();
                        NDArray ys = y.duplicate();
                        xs.attach(stepManager);
                        ys.attach(stepManager);
                        Batch batch =
                                new Batch(
                                        stepManager,
                                        new NDList(xs),
                                        new NDList(ys),
                                        8,
                                        Batchifier.STACK,
                                        Batchifier.STACK,
                                        step,
                                        STEPS);
                        EasyTrain.trainBatch(trainer, batch);
                        trainer.step();
                    }
                }
                for (Pair<String, ai.djl.nn.Parameter> p : block.getParameters()) {
                    NDArray w = p.getValue().getArray();
                    assertTrue(
                            w.isNaN().logicalOr(w.isInfinite()).none().getBoolean(),
                            p.getKey() + " stays finite");
                }
                AutocastStage stage = EngineAutocastTrainingTest.find(wrapped.shadowOn(gpu, data));
                assertNotNull(stage, "the recurrent block is an autocast stage");
                return stage;
            }
        }
    }
}
