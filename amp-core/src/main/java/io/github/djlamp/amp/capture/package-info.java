/**
 * The captured step: a training step whose device work is captured once into a graph after a few
 * eager warm-up steps and replayed for every later batch of the same shapes, one launch instead of
 * one per operation ({@link io.github.djlamp.amp.capture.CapturedStep}, made by {@code
 * AmpSession.captureStep}). This package decides when to capture, holds the static arrays a graph
 * reads and writes, and refuses, saying why, where a replay would differ from the eager step; the
 * engine layer captures and replays ({@link io.github.djlamp.amp.spi.StepGraphs}), and the session
 * keeps its host state in step with the replays ({@link
 * io.github.djlamp.amp.capture.CaptureHooks}).
 */
package io.github.djlamp.amp.capture;
