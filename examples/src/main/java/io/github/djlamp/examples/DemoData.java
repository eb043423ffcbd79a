package io.github.djlamp.examples;

import ai.djl.training.dataset.RandomAccessDataset;

/** The training and test sets of one demo run, with what the model needs to know of them. */
public final class DemoData {

    private final RandomAccessDataset train;
    private final RandomAccessDataset test;
    private final int channels;
    private final int classes;
    private final String description;

    /**
     * Creates the pair.
     *
     * @param train the prepared training set
     * @param test the prepared test set
     * @param channels image channels
     * @param classes number of classes
     * @param description where the data came from, for the output
     */
    public DemoData(
            RandomAccessDataset train,
            RandomAccessDataset test,
            int channels,
            int classes,
            String description) {
        this.train = train;
        this.test = test;
        this.channels = channels;
        this.classes = classes;
        this.description = description;
    }

    /**
     * Returns the training set.
     *
     * @return the prepared training set
     */
    public RandomAccessDataset train() {
        return train;
    }

    /**
     * Returns the test set.
     *
     * @return the prepared test set
     */
    public RandomAccessDataset test() {
        return test;
    }

    /**
     * Returns the number of image channels.
     *
     * @return 1 or 3
     */
    public int channels() {
        return channels;
    }

    /**
     * Returns the number of classes.
     *
     * @return classes
     */
    public int classes() {
        return classes;
    }

    /**
     * Returns where the data came from and how much of it is used.
     *
     * @return a short description
     */
    public String description() {
        return description + ": " + train.size() + " training and " + test.size() + " test images";
    }
}
