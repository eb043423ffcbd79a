package io.github.djlamp.bench;

/** Settings shared by the benchmarks' forked JVMs. */
final class BenchSettings {

    /** Keeps DJL's informational log lines out of the JMH output. */
    static final String QUIET_LOGS = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn";

    private BenchSettings() {}
}
