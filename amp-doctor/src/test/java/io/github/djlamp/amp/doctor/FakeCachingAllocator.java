package io.github.djlamp.amp.doctor;

/**
 * A stand-in for libtorch's CUDA caching allocator as {@code cudaMemGetInfo} sees it: freed blocks
 * stay reserved for reuse until the cache is emptied.
 */
final class FakeCachingAllocator {

    private long live;
    private long cached;
    private int emptied;

    /** Allocates, from cached blocks first, then from the device. */
    void allocate(long bytes) {
        long fromCache = Math.min(cached, bytes);
        cached -= fromCache;
        live += bytes;
    }

    /** Frees: the memory stays reserved, cached. */
    void free(long bytes) {
        live -= bytes;
        cached += bytes;
    }

    /** {@code emptyCache()}: cached blocks go back to the device. */
    void emptyCache() {
        cached = 0;
        emptied++;
    }

    /** What {@code cudaMemGetInfo} reports in use: everything reserved. */
    long used() {
        return live + cached;
    }

    int timesEmptied() {
        return emptied;
    }
}
