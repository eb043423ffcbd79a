package io.github.djlamp.amp.train;

import ai.djl.training.Trainer;
import ai.djl.training.listener.DivergenceCheckTrainingListener;
import ai.djl.training.listener.TrainingListenerAdapter;

/**
 * Stands in for DJL's {@link DivergenceCheckTrainingListener} in a configuration made by {@link
 * io.github.djlamp.amp.Amp#configure}: under loss scaling a non-finite loss skips its step, and
 * true divergence ends in a {@link io.github.djlamp.amp.scale.LossScaleCollapsedException} that
 * says so, so a NaN in DJL's running training loss (left there by a skipped micro-batch of an
 * accumulation window) is not divergence. Without loss scaling (bf16, fp32) it checks as DJL does.
 */
public final class AmpDivergenceCheckTrainingListener extends TrainingListenerAdapter {

    private final AmpSession session;
    private final DivergenceCheckTrainingListener djlCheck = new DivergenceCheckTrainingListener();

    /**
     * Creates the check.
     *
     * @param session the AMP session whose scaler skips non-finite steps
     */
    public AmpDivergenceCheckTrainingListener(AmpSession session) {
        this.session = session;
    }

    /** {@inheritDoc} */
    @Override
    public void onTrainingBatch(Trainer trainer, BatchData batchData) {
        if (!session.isScaling()) {
            djlCheck.onTrainingBatch(trainer, batchData);
        }
    }
}
