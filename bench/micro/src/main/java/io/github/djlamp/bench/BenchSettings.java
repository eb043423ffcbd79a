package io.github.djlamp.bench;

/** Settings shared by the benchmarks' forked JVMs. */
final class BenchSettings {

    /** DJL must not try the network. */
    static final String OFFLINE = "-Dai.djl.offline=true";

    /**
     * One PyTorch intra-op thread. On a shared 2-core machine a 2-thread parallel region waits for
     * a whole scheduler time slice whenever a neighbour holds the other core: a 20 us cast took
     * 15-22 ms under load, while one thread stayed within 2-3x of its quiet time.
     */
    static final String ONE_THREAD = "-Dai.djl.pytorch.num_threads=1";

    /** Keeps DJL's informational log lines out of the JMH output. */
    static final String QUIET_LOGS = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn";

    private BenchSettings() {}
}
