/**
 * What an engine must provide for mixed precision, found at run time through {@link
 * java.util.ServiceLoader}: see {@link io.github.djlamp.amp.spi.AmpBackend}.
 */
package io.github.djlamp.amp.spi;
