/**
 * What Java lambdas and a block's own forward do, read from class files with ASM: which lambda a
 * {@code LambdaBlock} or a {@code ParallelBlock}'s join runs ({@link
 * io.github.djlamp.amp.bytecode.LambdaSites}, {@link io.github.djlamp.amp.bytecode.LambdaProbe}),
 * whether its body calls only members safe on bf16 arrays ({@link
 * io.github.djlamp.amp.bytecode.SafeLambdaBodies}), and DJL's own functions and joins ({@link
 * io.github.djlamp.amp.bytecode.KnownLambdas}). The policy's cast rules ask it; it knows nothing of
 * policies. Not exported.
 */
package io.github.djlamp.amp.bytecode;
