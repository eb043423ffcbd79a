package io.github.djlamp.amp.distributed;

import ai.djl.ndarray.NDArray;
import ai.djl.nn.Parameter;
import ai.djl.training.Trainer;
import ai.djl.training.evaluator.Evaluator;
import ai.djl.training.listener.EvaluatorTrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.scale.LossScaler;
import io.github.djlamp.amp.scale.ScalerState;
import io.github.djlamp.amp.train.AmpSession;
import io.github.djlamp.amp.train.AmpTrainingListener;
import io.github.djlamp.amp.train.GradientReducer;
import java.util.List;

/**
 * Wires a trainer into the world: when the trainer is created, hands djl-amp's session the gradient
 * reducer, makes every parameter start from rank 0's value and leaves djl-amp's logging to rank 0;
 * at the end of each epoch, checks that the ranks' trainable weights are still identical.
 */
final class DataParallelListener extends TrainingListenerAdapter {

    private final World world;
    private final GradientReducer reducer;
    private final List<Evaluator> evaluators;
    private final List<RankMeans> means;

    DataParallelListener(
            World world,
            GradientReducer reducer,
            List<Evaluator> evaluators,
            List<RankMeans> means) {
        this.world = world;
        this.reducer = reducer;
        this.evaluators = evaluators;
        this.means = means;
    }

    /** {@inheritDoc} */
    @Override
    public void onTrainingBegin(Trainer trainer) {
        AmpSession session = AmpSession.of(trainer);
        SameSetup.require(session, trainer.getModel().getBlock(), world);
        session.setGradientReducer(reducer);
        if (!world.isRoot()) {
            // djl-amp's own INFO lines once, not once a rank
            trainer.notifyListeners(
                    listener -> {
                        if (listener instanceof AmpTrainingListener) {
                            ((AmpTrainingListener) listener).setLogging(false);
                        }
                    });
        }
        // the loss scale, growth tracker and counters a resumed run restored: rank 0's everywhere
        LossScaler scaler = session.getScaler();
        String state = world.broadcast(scaler.state().toString(), "loss scaler state");
        scaler.restore(ScalerState.parse(state));
        // called from the Trainer's constructor: parameters not initialized yet take rank 0's
        // value when Trainer.initialize (or the first forward) initializes them
        BroadcastInitializer.broadcastParameters(trainer.getModel().getBlock(), world);
    }

    /** {@inheritDoc} */
    @Override
    public void onEpoch(Trainer trainer) {
        requireSameWeights(trainer);
        // first among the listeners: the evaluator listener after it reads the ranks' means
        if (world.getSize() > 1) {
            RankMeans.sync(evaluators, means, EvaluatorTrainingListener.TRAIN_EPOCH, world);
            RankMeans.sync(evaluators, means, EvaluatorTrainingListener.VALIDATE_EPOCH, world);
        }
    }

    private void requireSameWeights(Trainer trainer) {
        if (world.getSize() == 1) {
            return;
        }
        double checksum = 0;
        for (Pair<String, Parameter> pair : trainer.getModel().getBlock().getParameters()) {
            Parameter parameter = pair.getValue();
            if (parameter.requiresGradient() && parameter.isInitialized()) {
                try (NDArray sum = parameter.getArray().sum()) {
                    checksum += sum.getFloat();
                }
            }
        }
        long bits = Double.doubleToLongBits(checksum);
        long[] extremes = world.allReduceMax(new long[] {bits, -bits}, "weight check");
        if (extremes[0] != bits || extremes[1] != -bits) {
            throw new IllegalStateException(
                    "The ranks' weights differ after this epoch (rank "
                            + world.getRank()
                            + " checksum "
                            + checksum
                            + "): something changed parameters on one rank only; call"
                            + " DataParallel.broadcastParameters(block, world) after changing"
                            + " them");
        }
    }
}
