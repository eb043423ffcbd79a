/**
 * djl-amp's engine-agnostic core: the front door ({@code Amp}, {@code AmpOptions}), precision
 * policies, the casting wrapper and its summary, loss scaling, the trainer glue and the verb API
 * for custom loops, kernel verification, the alignment report, and the SPI an engine implements.
 *
 * <p>Not exported: {@code bytecode}, the reading of lambdas from class files the cast rules ask,
 * {@code cast.internal}, what the casting wrapper shares with the trainer glue, {@code
 * cast.checkpoint}, the activation checkpointing inside the wrapper, and {@code cast.strategy}, the
 * stages of the mirrored composites and of the engine's own autocast. {@code internal} ({@code
 * DjlSeam}, every access past DJL's public API) is exported only to djl-amp's engine and
 * distributed modules. On the class path they are reachable, as every package is; none is part of
 * the API.
 */
// DJL's api jar is an automatic module with a declared Automatic-Module-Name (ai.djl.api): the
// name is stable, and the API here hands out its types (Block, NDArray, TrainingConfig).
// The qualified export names modules built after this one.
@SuppressWarnings({"requires-automatic", "requires-transitive-automatic", "module"})
module io.github.djlamp.amp {
    requires transitive ai.djl.api;
    requires org.slf4j;
    requires jdk.unsupported; // Unsafe.allocateInstance: copies of a block djl-amp read
    // (ReadBlockShadow)
    requires org.objectweb.asm;
    requires org.objectweb.asm.tree;
    requires org.objectweb.asm.tree.analysis;

    exports io.github.djlamp.amp;
    exports io.github.djlamp.amp.capture;
    exports io.github.djlamp.amp.cast;
    exports io.github.djlamp.amp.compile;
    exports io.github.djlamp.amp.diagnostics;
    exports io.github.djlamp.amp.exception;
    exports io.github.djlamp.amp.policy;
    exports io.github.djlamp.amp.scale;
    exports io.github.djlamp.amp.spi;
    exports io.github.djlamp.amp.train;
    exports io.github.djlamp.amp.verify;
    exports io.github.djlamp.amp.internal to
            io.github.djlamp.amp.pytorch,
            io.github.djlamp.amp.distributed;

    uses io.github.djlamp.amp.spi.AmpBackend;
}
