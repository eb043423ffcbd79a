/**
 * {@link io.github.djlamp.amp.exception.AmpException}, what every package of djl-amp throws when
 * mixed precision cannot do what was asked.
 *
 * <p>It sits in a package of its own that imports nothing else of djl-amp, so that every other
 * package can throw it without depending on the front door ({@code io.github.djlamp.amp.Amp}),
 * which depends on them.
 */
package io.github.djlamp.amp.exception;
