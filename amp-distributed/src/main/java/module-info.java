/**
 * Data-parallel mixed precision training across MPI processes: {@code World}, {@code
 * DistributedSampler}, {@code DataParallel} and its options, atomic checkpoints.
 */
// JNA's jar is an automatic module with a declared Automatic-Module-Name (com.sun.jna).
@SuppressWarnings("requires-automatic")
module io.github.djlamp.amp.distributed {
    requires transitive io.github.djlamp.amp;
    requires com.sun.jna;
    requires org.slf4j;

    exports io.github.djlamp.amp.distributed;
}
