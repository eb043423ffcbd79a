package io.github.djlamp.amp.capture;

import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;

/** One step run eagerly: the body, then the session's end of the step. */
final class EagerStep {

    private final CaptureHooks hooks;
    private final StepBody body;

    EagerStep(CaptureHooks hooks, StepBody body) {
        this.hooks = hooks;
        this.body = body;
    }

    /** The step on a batch of the caller's. */
    NDList run(NDList data, NDList labels) {
        NDList result = body.run(data, labels);
        if (result == null) {
            throw new IllegalStateException(
                    "The captured step's body returned null: return what the loop reads after"
                            + " the step, e.g. new NDList(loss), or new NDList() for nothing");
        }
        hooks.step();
        return result;
    }

    /**
     * The step on the static arrays: what it makes from them is freed after it (their manager,
     * {@code manager}, would keep it), what it returns goes to {@code keep}. The body gets lists of
     * its own: a forward may append to its labels (DJL's {@code EncoderDecoder} appends its
     * encoder's states), which must not grow the static list.
     */
    NDList onStatics(StaticBatch statics, NDManager manager, NDManager keep) {
        try (NDManager step = manager.newSubManager()) {
            statics.data().tempAttach(step);
            statics.labels().tempAttach(step);
            NDList result = run(new NDList(statics.data()), new NDList(statics.labels()));
            result.attach(keep);
            return result;
        }
    }
}
