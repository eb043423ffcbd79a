package io.github.djlamp.amp.distributed.modulepath;

import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.Pair;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.distributed.DataParallel;
import io.github.djlamp.amp.distributed.DistributedSampler;
import io.github.djlamp.amp.distributed.World;
import io.github.djlamp.amp.train.AmpSession;
import java.util.Arrays;

/**
 * What {@code ModulePathMpiTest} runs on every rank, with djl-amp's modules, DJL's api and PyTorch
 * engine, JNA and slf4j on the module path: a data-parallel mixed_float16 MLP, each rank starting
 * from its own random initialization. Prints the module {@code World} came from, the steps taken
 * and a hash of the trained weights' bits, which must agree across ranks.
 */
public final class ModulePathJob {

    /** The optimizer steps each rank takes. */
    public static final int STEPS = 3;

    private static final int GLOBAL_BATCH = 8;
    private static final int FEATURES = 6;

    private ModulePathJob() {}

    /**
     * Trains on the world the launcher started.
     *
     * @param args none
     * @throws Exception when training fails
     */
    public static void main(String[] args) throws Exception {
        try (World world = World.init()) {
            Engine.getInstance().setRandomSeed(100 + world.getRank());
            SequentialBlock mlp =
                    new SequentialBlock()
                            .add(Linear.builder().setUnits(8).build())
                            .add(Activation.reluBlock())
                            .add(Linear.builder().setUnits(1).build());
            try (Model model = Model.newInstance("module-path-job");
                    NDManager data = NDManager.newBaseManager()) {
                model.setBlock(Amp.wrap(mlp, "mixed_float16"));
                // every rank draws the same data set; the sampler gives each its share
                Engine.getInstance().setRandomSeed(7);
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(
                                        data.randomNormal(
                                                new Shape(STEPS * GLOBAL_BATCH, FEATURES)))
                                .optLabels(data.randomNormal(new Shape(STEPS * GLOBAL_BATCH, 1)))
                                .setSampling(new DistributedSampler(GLOBAL_BATCH, false, 0, world))
                                .build();
                // DJL's L2 loss (mul(Number), not GC-safe) is fine here: the ranks' reduced
                // gradients agree whatever a collection does to them, and steps count skips
                DefaultTrainingConfig config =
                        new DefaultTrainingConfig(Loss.l2Loss())
                                .optOptimizer(
                                        Optimizer.sgd()
                                                .setLearningRateTracker(Tracker.fixed(0.01f))
                                                .build());
                try (Trainer trainer =
                        model.newTrainer(
                                DataParallel.configure(
                                        Amp.configure(config, model.getBlock()), world))) {
                    trainer.initialize(new Shape(GLOBAL_BATCH / world.getSize(), FEATURES));
                    EasyTrain.fit(trainer, 1, dataset, null);
                    int hash = 1;
                    for (Pair<String, Parameter> pair : model.getBlock().getParameters()) {
                        hash =
                                31 * hash
                                        + Arrays.hashCode(
                                                pair.getValue().getArray().toFloatArray());
                    }
                    System.out.println(
                            "rank "
                                    + world.getRank()
                                    + " of "
                                    + world.getSize()
                                    + ": World from module "
                                    + World.class.getModule().getName()
                                    + ", steps "
                                    + AmpSession.of(trainer).getScaler().getSteps()
                                    + ", weights "
                                    + Integer.toHexString(hash));
                }
            }
        }
    }
}
