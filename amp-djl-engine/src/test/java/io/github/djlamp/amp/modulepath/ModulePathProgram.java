package io.github.djlamp.amp.modulepath;

import ai.djl.Model;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.EasyTrain;
import ai.djl.training.Trainer;
import ai.djl.training.dataset.ArrayDataset;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.policy.DefaultCastRules;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.AmpSession;

/**
 * A training program on the class path with djl-amp's modules on the module path (what {@link
 * ModulePathTest} starts): prints where each module was found, which packages amp-core exports, and
 * the steps a mixed_float16 training took, and how it categorizes a method reference to DJL's relu
 * (read from this class's file).
 */
public final class ModulePathProgram {

    static final String CORE = "io.github.djlamp.amp";
    static final String ENGINE = "io.github.djlamp.amp.pytorch";
    static final int STEPS = 3;

    private ModulePathProgram() {}

    /**
     * Runs the program.
     *
     * @param args none
     * @throws Exception when training fails
     */
    public static void main(String[] args) throws Exception {
        Module core = Amp.class.getModule();
        System.out.println("amp-core module: " + core.getName());
        Object backend = AmpBackends.forEngine("PyTorch");
        System.out.println(
                "backend: "
                        + backend.getClass().getName()
                        + " from module "
                        + backend.getClass().getModule().getName());
        System.out.println("exported: " + String.join(" ", exported(core)));
        Module engine = backend.getClass().getModule();
        System.out.println(
                "internal to the engine: " + core.isExported(CORE + ".internal", engine));
        System.out.println("steps taken: " + train());
    }

    private static java.util.SortedSet<String> exported(Module module) {
        java.util.SortedSet<String> names = new java.util.TreeSet<>();
        for (String name : module.getPackages()) {
            if (module.isExported(name)) {
                names.add(name);
            }
        }
        return names;
    }

    private static long train() throws Exception {
        SequentialBlock net =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(Activation.reluBlock())
                        .add(Linear.builder().setUnits(8).build())
                        .add(Activation::relu)
                        .add(Linear.builder().setUnits(1).build());
        // amp-core, a named module, reads this class's file to know the method reference
        System.out.println(
                "Activation::relu: "
                        + DefaultCastRules.categoryOf(net.getChildren().get(3).getValue()));
        try (Model model = Model.newInstance("module-path", "PyTorch")) {
            MixedPrecisionBlock block = Amp.wrap(net, "mixed_float16");
            model.setBlock(block);
            // DJL's L2 loss (mul(Number), not GC-safe) is fine here: only the step count is read
            DefaultTrainingConfig config =
                    new DefaultTrainingConfig(Loss.l2Loss())
                            .optOptimizer(
                                    Optimizer.sgd()
                                            .setLearningRateTracker(Tracker.fixed(0.01f))
                                            .build());
            try (Trainer trainer = model.newTrainer(Amp.configure(config, block));
                    NDManager data = trainer.getManager().newSubManager()) {
                trainer.initialize(new Shape(4, 6));
                ArrayDataset dataset =
                        new ArrayDataset.Builder()
                                .setData(data.randomNormal(new Shape(4 * STEPS, 6)))
                                .optLabels(data.randomNormal(new Shape(4 * STEPS, 1)))
                                .setSampling(4, false)
                                .build();
                EasyTrain.fit(trainer, 1, dataset, null); // captures its step where it can
                return AmpSession.of(trainer).getScaler().getSteps();
            }
        }
    }
}
