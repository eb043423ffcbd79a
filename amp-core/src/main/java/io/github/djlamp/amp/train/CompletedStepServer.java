package io.github.djlamp.amp.train;

import ai.djl.ndarray.NDArray;
import ai.djl.training.LocalParameterServer;
import ai.djl.training.ParameterServer;

/**
 * The trainer's parameter server while {@code EasyTrain.fit}'s step is captured ({@link
 * EasyTrainCapture}): DJL's own, except that {@code trainer.step()} after a step the forward
 * already completed does nothing at all, not even fetch each parameter's gradient.
 */
final class CompletedStepServer implements ParameterServer {

    private final ParameterServer delegate;
    private final LossScalingOptimizer optimizer;
    private final AmpSession session;

    CompletedStepServer(LossScalingOptimizer optimizer, AmpSession session) {
        this.delegate = new LocalParameterServer(optimizer);
        this.optimizer = optimizer;
        this.session = session;
    }

    /** {@inheritDoc} */
    @Override
    public void init(String parameterId, NDArray[] value) {
        delegate.init(parameterId, value);
    }

    /** {@inheritDoc} */
    @Override
    public void update(String parameterId, NDArray[] params) {
        if (session.isStepDoneBeforeListeners()) {
            return;
        }
        if (params.length == 1 && optimizer.fusedUpdate() != null) {
            try (NDArray gradient = params[0].getGradient()) {
                optimizer.update(parameterId, params[0], gradient);
            }
            return;
        }
        delegate.update(parameterId, params);
    }

    /** {@inheritDoc} */
    @Override
    public void update(String parameterId, NDArray[] grads, NDArray[] params) {
        if (!session.isStepDoneBeforeListeners()) {
            delegate.update(parameterId, grads, params);
        }
    }

    /** {@inheritDoc} */
    @Override
    public void close() {
        delegate.close();
    }
}
