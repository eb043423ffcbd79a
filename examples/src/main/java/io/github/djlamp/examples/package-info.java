/** Programs a person reads top to bottom: what djl-amp does, on real models and data. */
package io.github.djlamp.examples;
