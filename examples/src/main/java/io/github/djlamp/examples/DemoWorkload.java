package io.github.djlamp.examples;

import java.util.Locale;

/**
 * What the demo trains: the model, the image size and the batch, each as given on the command line
 * or chosen for the device, with the reason for what was chosen.
 *
 * <p>On a CPU the default is ResNet-20 on the dataset's own images (28x28 Fashion-MNIST), batch 64:
 * a few minutes on 2 cores, and bf16 pays there even on small convolutions. On a GPU that workload
 * shows nothing of mixed precision: its kernels are too small to keep the GPU busy, so launches and
 * the host set the pace and the casts only add work (on an H100, ResNet-20 on 28x28 ran 0.86x with
 * AMP). The GPU default is ResNet-50 on images upscaled to 224x224, whose convolutions are large
 * enough for Tensor Cores' 16-bit math to set the pace, with a batch sized from the free device
 * memory.
 */
final class DemoWorkload {

    /** The image side the GPU default trains on. */
    static final int GPU_IMAGE_SIZE = 224;

    /** The largest batch chosen from free memory. */
    static final int MAX_AUTO_BATCH = 256;

    /** The smallest batch chosen from free memory; batches are multiples of it (Tensor Cores). */
    static final int MIN_AUTO_BATCH = 8;

    /** The share of free device memory the fp32 run may plan for. */
    static final double MEMORY_SHARE = 0.6;

    /**
     * Device memory of one image in an fp32 training step of DJL's ResNet-50 at 224x224: 42.3 GB at
     * batch 256 on an H100 (2026-11-23, DJL 0.35.1); scaled by the pixel count for other sizes.
     */
    static final long RESNET50_BYTES_PER_IMAGE_224 = 165L << 20;

    /** The same for ResNet-18: its activations are about 40% of ResNet-50's. */
    static final long RESNET18_BYTES_PER_IMAGE_224 = 66L << 20;

    /** The CPU default batch, and the batch of ResNet-20 anywhere. */
    static final int DEFAULT_BATCH = 64;

    private final DemoModel model;
    private final int imageSize;
    private final int batchSize;
    private final boolean resized;
    private final String reason;

    private DemoWorkload(
            DemoModel model, int imageSize, int batchSize, boolean resized, String reason) {
        this.model = model;
        this.imageSize = imageSize;
        this.batchSize = batchSize;
        this.resized = resized;
        this.reason = reason;
    }

    /**
     * Chooses what was not given.
     *
     * @param gpu whether training runs on a GPU
     * @param freeBytes free device memory on that GPU, or -1 when unknown or on a CPU
     * @param nativeSize the dataset's own image side (28 for Fashion-MNIST, 32 for CIFAR-10)
     * @param model the model given, or null
     * @param imageSize the image side given, or null
     * @param batchSize the batch given, or null
     * @return the workload
     */
    static DemoWorkload choose(
            boolean gpu,
            long freeBytes,
            int nativeSize,
            DemoModel model,
            Integer imageSize,
            Integer batchSize) {
        if (!gpu) {
            DemoModel m = model != null ? model : DemoModel.RESNET20;
            int size = imageSize != null ? imageSize : nativeSize;
            int batch = batchSize != null ? batchSize : DEFAULT_BATCH;
            String why =
                    model == null && imageSize == null && batchSize == null
                            ? "the CPU default, sized for a few minutes on 2 cores (on a CPU, bf16"
                                    + " pays even on small convolutions)"
                            : "as given, defaults for a CPU";
            return new DemoWorkload(m, size, batch, size != nativeSize, why);
        }
        DemoModel m = model != null ? model : DemoModel.RESNET50;
        int size =
                imageSize != null
                        ? imageSize
                        : m == DemoModel.RESNET20 ? nativeSize : GPU_IMAGE_SIZE;
        StringBuilder why = new StringBuilder();
        if (model == null) {
            why.append(
                    "on a GPU, ResNet-20 on 28x28 images is too small to keep it busy (kernel"
                            + " launches and the host set the pace, and AMP ran 0.86x on an H100);"
                            + " ResNet-50 on 224x224 images has convolutions large enough for"
                            + " Tensor Cores' 16-bit math to matter");
        } else {
            why.append("as given");
        }
        int batch;
        if (batchSize != null) {
            batch = batchSize;
        } else if (m == DemoModel.RESNET20 || freeBytes <= 0) {
            batch = DEFAULT_BATCH;
            if (m != DemoModel.RESNET20) {
                why.append("; batch ").append(batch).append(": free device memory unknown");
            }
        } else {
            long perImage = bytesPerImage(m, size);
            batch = batchFromMemory(freeBytes, perImage);
            why.append(
                    String.format(
                            Locale.ROOT,
                            "; batch %d from %.1f GiB free device memory (about %d MiB an image in"
                                    + " fp32, %d%% of it planned for, at most %d)",
                            batch,
                            freeBytes / (double) (1L << 30),
                            perImage >> 20,
                            Math.round(MEMORY_SHARE * 100),
                            MAX_AUTO_BATCH));
        }
        return new DemoWorkload(m, size, batch, size != nativeSize, why.toString());
    }

    /** Estimated device memory of one image in an fp32 training step. */
    static long bytesPerImage(DemoModel model, int imageSize) {
        long at224 =
                model == DemoModel.RESNET50
                        ? RESNET50_BYTES_PER_IMAGE_224
                        : RESNET18_BYTES_PER_IMAGE_224;
        double pixels = (double) imageSize * imageSize / (GPU_IMAGE_SIZE * GPU_IMAGE_SIZE);
        return Math.max(1, Math.round(at224 * pixels));
    }

    /** The batch that fits the planned share of free memory: a multiple of 8 in [8, 256]. */
    static int batchFromMemory(long freeBytes, long bytesPerImage) {
        long fits = (long) (freeBytes * MEMORY_SHARE) / bytesPerImage;
        long batch = fits / MIN_AUTO_BATCH * MIN_AUTO_BATCH;
        return (int) Math.max(MIN_AUTO_BATCH, Math.min(MAX_AUTO_BATCH, batch));
    }

    DemoModel model() {
        return model;
    }

    int imageSize() {
        return imageSize;
    }

    int batchSize() {
        return batchSize;
    }

    /** Whether the dataset's images are resized to {@link #imageSize()}. */
    boolean resized() {
        return resized;
    }

    /** Why this workload, in a clause. */
    String reason() {
        return reason;
    }

    /** One line for the output, e.g. {@code ResNet-50 on 224x224 images, batch 256}. */
    String describe(int nativeSize) {
        return String.format(
                Locale.ROOT,
                "ResNet-%d on %dx%d images%s, batch %d",
                model.layers(),
                imageSize,
                imageSize,
                resized ? " (resized from " + nativeSize + "x" + nativeSize + ")" : "",
                batchSize);
    }
}
