package io.github.djlamp.amp.distributed;

import ai.djl.Model;
import ai.djl.training.Trainer;
import ai.djl.training.listener.SaveModelTrainingListener;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam;
import java.io.IOException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * DJL's {@link SaveModelTrainingListener} (same constructors, schedule, file names and callback),
 * with every checkpoint written through {@link AtomicCheckpoint}, the optimizer's state beside the
 * weights: a process dying or a job aborted while it saves leaves the previous checkpoint the
 * newest complete one. One difference: after {@code model.load} of a checkpoint, the numbering
 * continues from its epoch. {@link DataParallel} puts one in place of each plain {@code
 * SaveModelTrainingListener}, on rank 0 only; it is as useful in one process.
 */
public final class AtomicSaveModelTrainingListener extends SaveModelTrainingListener {

    private static final Logger logger =
            LoggerFactory.getLogger(AtomicSaveModelTrainingListener.class);

    private static final String EPOCH_PROPERTY = "Epoch";

    private final String outputDir;
    private Consumer<Trainer> onSaveModel;
    private int epoch;

    /**
     * Saves once, when training ends.
     *
     * @param outputDir the checkpoint directory
     */
    public AtomicSaveModelTrainingListener(String outputDir) {
        this(outputDir, null, -1);
    }

    /**
     * Saves once, when training ends, under another name than the model's.
     *
     * @param outputDir the checkpoint directory
     * @param overrideModelName the checkpoint name, or null for the model's
     */
    public AtomicSaveModelTrainingListener(String outputDir, String overrideModelName) {
        this(outputDir, overrideModelName, -1);
    }

    /**
     * Saves every {@code checkpoint} epochs, and when training ends if the last epoch was not one.
     *
     * @param outputDir the checkpoint directory
     * @param overrideModelName the checkpoint name, or null for the model's
     * @param checkpoint the interval in epochs; -1 to save only when training ends
     */
    public AtomicSaveModelTrainingListener(
            String outputDir, String overrideModelName, int checkpoint) {
        super(outputDir, overrideModelName, checkpoint);
        this.outputDir = outputDir;
    }

    /**
     * The atomic equivalent of a plain listener: its directory, name, interval, callback and epoch
     * count. DJL's listener offers no getter for the directory, the callback and the count, so they
     * are read from its private fields through {@link DjlSeam}.
     */
    static AtomicSaveModelTrainingListener of(SaveModelTrainingListener plain) {
        try {
            String directory = DjlSeam.saveDirectory(plain);
            Consumer<Trainer> callback = DjlSeam.saveCallback(plain);
            int epochs = DjlSeam.saveEpochCount(plain);
            AtomicSaveModelTrainingListener atomic =
                    new AtomicSaveModelTrainingListener(
                            directory, plain.getOverrideModelName(), plain.getCheckpoint());
            if (callback != null) {
                atomic.setSaveModelCallback(callback);
            }
            atomic.epoch = epochs;
            return atomic;
        } catch (AmpException e) {
            throw new IllegalStateException(
                    "Cannot read this DJL version's SaveModelTrainingListener settings to save its"
                            + " checkpoints atomically: use new AtomicSaveModelTrainingListener("
                            + "outputDir, modelName, checkpoint) instead (same arguments). "
                            + e.getMessage(),
                    e);
        }
    }

    /**
     * Continues the numbering of a loaded checkpoint: after {@code model.load} of epoch {@code k}
     * (its {@code Epoch} property), the next checkpoint is {@code k + 1}, where DJL's listener
     * would start again at 1, overwrite the older ones and leave epoch {@code k} the newest.
     */
    @Override
    public void onTrainingBegin(Trainer trainer) {
        String loaded = trainer.getModel().getProperty(EPOCH_PROPERTY);
        if (epoch == 0 && loaded != null) {
            try {
                epoch = Integer.parseInt(loaded.trim());
            } catch (NumberFormatException e) {
                logger.warn(
                        "djl-amp: the model's Epoch property '{}' is not a number: checkpoints"
                                + " are numbered from 1",
                        loaded);
            }
        }
    }

    /** {@inheritDoc} */
    @Override
    public void onEpoch(Trainer trainer) {
        epoch++;
        int interval = getCheckpoint();
        if (interval > 0 && epoch % interval == 0) {
            saveModel(trainer);
        }
    }

    /** {@inheritDoc} */
    @Override
    public void onTrainingEnd(Trainer trainer) {
        int interval = getCheckpoint();
        if (interval <= 0 || epoch % interval != 0) {
            saveModel(trainer);
        }
    }

    /** {@inheritDoc} */
    @Override
    public void setSaveModelCallback(Consumer<Trainer> onSaveModel) {
        this.onSaveModel = onSaveModel;
        super.setSaveModelCallback(onSaveModel);
    }

    /**
     * Returns the checkpoint directory.
     *
     * @return the directory
     */
    public Path getOutputDir() {
        return Paths.get(outputDir);
    }

    /** Saves as DJL's listener does, through {@link AtomicCheckpoint}. */
    @Override
    protected void saveModel(Trainer trainer) {
        Model model = trainer.getModel();
        String name = getOverrideModelName() != null ? getOverrideModelName() : model.getName();
        try {
            model.setProperty(EPOCH_PROPERTY, String.valueOf(epoch));
            if (onSaveModel != null) {
                onSaveModel.accept(trainer);
            }
            Path file = AtomicCheckpoint.save(trainer, getOutputDir(), name);
            logger.debug("djl-amp: checkpoint {} written", file);
        } catch (IOException e) {
            // as DJL's listener: training goes on; the earlier checkpoints are untouched
            logger.error("Failed to save checkpoint; the earlier checkpoints are intact", e);
        }
    }
}
