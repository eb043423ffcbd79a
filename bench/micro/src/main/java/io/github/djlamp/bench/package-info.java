/**
 * JMH micro-benchmarks of djl-amp's engine layer ({@link io.github.djlamp.amp.spi.AmpBackend}) and
 * the writer that turns their JSON results into a section of {@code bench/RESULTS.md}. Run them
 * with {@code bench/run-micro.sh}; the build only compiles them.
 */
package io.github.djlamp.bench;
