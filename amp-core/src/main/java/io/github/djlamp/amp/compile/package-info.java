/**
 * The compiled forward (on by default): a run of blocks djl-amp knows, written as one TorchScript
 * method that takes the input and every parameter, so that a step crosses JNI once for the run
 * instead of once an operation. This package is engine-agnostic: it writes the graph and lists the
 * parameters; an engine loads and runs it, and the wrapper's shadow tree decides where runs go.
 */
package io.github.djlamp.amp.compile;
