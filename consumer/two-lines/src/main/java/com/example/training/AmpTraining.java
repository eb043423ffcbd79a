package com.example.training;

import ai.djl.Model;
import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.TrainingResult;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.listener.TrainingListener;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.translate.TranslateException;
import io.github.djlamp.amp.Amp;
import java.io.IOException;

/** A DJL training program: model-zoo ResNet-20 on random 28x28 images, batch 8. */
public final class AmpTraining {

    private AmpTraining() {}

    /** Trains two steps and prints the result. */
    public static void main(String[] args) throws IOException, TranslateException {
        System.out.println(train(2));
    }

    /** Trains {@code steps} steps of batch 8 and returns DJL's training result. */
    public static TrainingResult train(int steps) throws IOException, TranslateException {
        int batchSize = 8;
        try (NDManager manager = NDManager.newBaseManager()) {
            manager.getEngine().setRandomSeed(42);
            ArrayDataset trainingSet =
                    new ArrayDataset.Builder()
                            .setData(manager.randomUniform(0, 1, new Shape(steps * batchSize, 1, 28, 28)))
                            .optLabels(manager.arange(0f, steps * batchSize, 1f).mod(10f))
                            .setSampling(batchSize, false)
                            .build();
            Block block = ResNetV1.builder().setImageShape(new Shape(1, 28, 28)).setNumLayers(20).setOutSize(10).build();
            try (Model model = Model.newInstance("resnet")) {
                model.setBlock(Amp.wrap(block, "auto"));
                DefaultTrainingConfig config =
                        new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                                .optOptimizer(Optimizer.adam().build())
                                .addTrainingListeners(TrainingListener.Defaults.basic());
                try (Trainer trainer = model.newTrainer(Amp.configure(config, model.getBlock()))) {
                    trainer.initialize(new Shape(batchSize, 1, 28, 28));
                    EasyTrain.fit(trainer, 1, trainingSet, null);
                    return trainer.getTrainingResult();
                }
            }
        }
    }
}
