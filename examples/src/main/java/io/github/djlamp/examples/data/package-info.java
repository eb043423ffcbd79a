/**
 * Fashion-MNIST for the examples, read offline through DJL's own {@code FashionMnist} loader.
 *
 * <p>{@link io.github.djlamp.examples.data.FashionMnistData} finds the four gzip IDX files (a
 * folder given by the caller or the {@code djlamp.data.dir} system property, the project's shared
 * copy at {@code ../shared/data/fashion-mnist}, or the small subset shipped in this module), writes
 * a DJL {@code LocalRepository} that points at them, and hands back a configured {@code
 * FashionMnist.Builder}. {@link io.github.djlamp.examples.data.MakeSubset} made the shipped subset.
 */
package io.github.djlamp.examples.data;
