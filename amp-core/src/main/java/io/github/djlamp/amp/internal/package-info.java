/**
 * What djl-amp's own modules share and a training program does not call.
 *
 * <p>{@link io.github.djlamp.amp.internal.DjlSeam} holds every access past DJL's public API
 * (private fields with no getter) and the DJL versions djl-amp is tested with. Not part of
 * djl-amp's API: it may change in any release. amp-core's module descriptor exports this package
 * only to amp-djl-engine and amp-distributed.
 */
package io.github.djlamp.amp.internal;
