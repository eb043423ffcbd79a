/**
 * The compiled forward (a prototype, off by default): the forward of a block tree made of blocks
 * djl-amp knows, written as one TorchScript method that takes the input and every parameter, so
 * that a step crosses JNI once for the forward instead of once an operation. This package is
 * engine-agnostic: it writes the source and lists the parameters; an engine loads and runs it.
 */
package io.github.djlamp.amp.compile;
