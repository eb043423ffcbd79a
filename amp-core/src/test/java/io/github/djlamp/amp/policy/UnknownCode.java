package io.github.djlamp.amp.policy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import java.util.List;

/**
 * Functions of unknown content to djl-amp: a lambda that calls into another class of the user's is
 * code it cannot read as safe on bf16 arrays (a lambda whose whole body it can read, such as {@code
 * x -> x}, it can). Tests use these where they mean a lambda that may do anything.
 */
public final class UnknownCode {

    private UnknownCode() {}

    /**
     * Returns its input.
     *
     * @param x the input
     * @return {@code x}
     */
    public static NDList same(NDList x) {
        return x;
    }

    /**
     * Returns its input.
     *
     * @param x the input
     * @return {@code x}
     */
    public static NDArray sameArray(NDArray x) {
        return x;
    }

    /**
     * Returns the first branch's outputs, as a join.
     *
     * @param branches the branch outputs
     * @return the first
     */
    public static NDList first(List<NDList> branches) {
        return branches.get(0);
    }
}
