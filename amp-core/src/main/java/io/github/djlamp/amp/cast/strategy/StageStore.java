package io.github.djlamp.amp.cast.strategy;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;

/**
 * What the stages of this package need of the parameter store a {@code MixedPrecisionBlock}'s
 * forward pass hands down its shadow tree (the casting wrapper's, in {@code cast}, extends it): the
 * trainer's store, the casts at a stage's boundary, and the counts of the first forward. A
 * parameter store itself, so that a stage hands it on to the shadows of its children as it is.
 */
public abstract class StageStore extends ParameterStore {

    /**
     * Makes the store of one forward pass.
     *
     * @param manager the trainer's store's manager
     */
    protected StageStore(NDManager manager) {
        super(manager, false);
    }

    /**
     * Returns the trainer's own store, which holds the fp32 masters.
     *
     * @return the trainer's store
     */
    public abstract ParameterStore delegate();

    /**
     * Returns the engine's backend of this forward pass.
     *
     * @return the backend
     */
    public abstract AmpBackend backend();

    /**
     * Returns the precision low-precision stages compute in.
     *
     * @return the compute precision
     */
    public abstract Precision computePrecision();

    /**
     * Casts floating arrays to the compute precision in the layout they have: the operands of an
     * operation that is not a layer, such as an attention product.
     *
     * @param arrays the arrays
     * @return the arrays, those that were cast replaced by their casts
     */
    public abstract NDList toCompute(NDList arrays);

    /**
     * Casts like {@link #toCompute(NDList)}, reading the arrays' precisions through {@code known}:
     * the same place of every forward.
     *
     * @param arrays the arrays
     * @param known the place's precisions, decided once
     * @return the arrays, those that were cast replaced by their casts
     */
    public abstract NDList toCompute(NDList arrays, InputPrecisions known);

    /**
     * Casts floating arrays to contiguous fp32, safe for any DJL operation.
     *
     * @param arrays the arrays
     * @return the arrays, those that were cast replaced by their casts
     */
    public abstract NDList toFp32(NDList arrays);

    /**
     * Casts like {@link #toFp32(NDList)}, reading the arrays' precisions through {@code known}: the
     * same place of every forward.
     *
     * @param arrays the arrays
     * @param known the place's precisions, decided once
     * @return the arrays, those that were cast replaced by their casts
     */
    public abstract NDList toFp32(NDList arrays, InputPrecisions known);

    /**
     * Returns whether a product of two activations that this forward computes in the compute
     * precision (attention's two products) runs in it: always, unless the kernel check of its
     * signature, made at its first use, found the 16-bit product wrong; then it runs in fp32.
     *
     * @param path where the product is, for the report
     * @param what which product, for the report
     * @param left the left operand, in the compute precision
     * @param right the right operand, in the compute precision
     * @param training whether the operands' gradients may be computed (then their kernels are
     *     checked too)
     * @return false where the product must run in fp32
     */
    public abstract boolean productRunsLow(
            String path, String what, NDArray left, NDArray right, boolean training);

    /**
     * Returns whether a block the engine's own autocast runs may compute in 16 bits at these
     * inputs: the verdict of its check against fp32 (checked at the first forward of each
     * signature), or true where kernel checks are off. A failed check is reported once, by the
     * check.
     *
     * @param block the block under autocast
     * @param path where it is, for the report
     * @param inputs its inputs
     * @param training whether the caller trains (which copy of the parameters to read)
     * @param params the forward's extra parameters
     * @return false where the block must run in fp32
     * @throws ai.djl.engine.EngineException when the engine cannot run it under its autocast
     */
    public abstract boolean engineAutocastRunsLow(
            Block block,
            String path,
            NDList inputs,
            boolean training,
            PairList<String, Object> params);

    /**
     * Tells the forward that counts the model's arithmetic that it does not show what later ones
     * run (a stage ran it in fp32 to make its parameters): the next forward counts instead.
     */
    public abstract void deferArithmetic();

    /**
     * Records a stage's arithmetic where this forward counts it.
     *
     * @param path the stage's path
     * @param block the user's block the stage runs
     * @param ran the precision it computed in
     * @param inputs its inputs
     * @param outputs its outputs
     */
    public abstract void recordArithmetic(
            String path, Block block, Precision ran, NDList inputs, NDList outputs);

    /**
     * Records the arithmetic of a product that is not a layer's where this forward counts it.
     *
     * @param path the path of the block that computes it
     * @param what what the product is, for the report
     * @param ran the precision it computed in
     * @param flops its floating-point operations
     */
    public abstract void recordProduct(String path, String what, Precision ran, long flops);

    /**
     * Counts the outputs of a layer that are not its inputs passed on, where this store estimates a
     * checkpointing saving.
     *
     * @param outputs the layer's outputs
     * @param inputs its inputs
     */
    public abstract void countMade(NDList outputs, NDList inputs);
}
