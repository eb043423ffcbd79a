package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** What the demo trains, on a CPU and on a GPU, given or chosen. */
class DemoWorkloadTest {

    private static final long GIB = 1L << 30;

    @Test
    void theCpuDefaultIsTodaysResNet20On28PixelImagesAtBatch64() {
        DemoWorkload w = DemoWorkload.choose(false, -1, 28, null, null, null);
        assertEquals(DemoModel.RESNET20, w.model());
        assertEquals(28, w.imageSize());
        assertEquals(64, w.batchSize());
        assertFalse(w.resized());
        assertEquals("ResNet-20 on 28x28 images, batch 64", w.describe(28));
        assertTrue(w.reason().contains("CPU default"), w.reason());
    }

    @Test
    void onAGpuTheDefaultIsResNet50At224WithABatchFromFreeMemoryAndSaysWhy() {
        DemoWorkload w = DemoWorkload.choose(true, 79 * GIB, 28, null, null, null);
        assertEquals(DemoModel.RESNET50, w.model());
        assertEquals(224, w.imageSize());
        assertEquals(256, w.batchSize(), "capped");
        assertTrue(w.resized());
        assertEquals("ResNet-50 on 224x224 images (resized from 28x28), batch 256", w.describe(28));
        assertTrue(w.reason().contains("0.86x"), w.reason());
        assertTrue(w.reason().contains("Tensor Cores"), w.reason());
        assertTrue(w.reason().contains("79.0 GiB free"), w.reason());

        // 8 GiB free: 60% of it at 165 MiB an image fits 29 images; a multiple of 8 below
        DemoWorkload small = DemoWorkload.choose(true, 8 * GIB, 28, null, null, null);
        assertEquals(24, small.batchSize());
        assertEquals(8, DemoWorkload.choose(true, GIB / 2, 28, null, null, null).batchSize());
    }

    @Test
    void whatIsGivenIsKeptAndTheRestFollowsIt() {
        DemoWorkload given = DemoWorkload.choose(true, 79 * GIB, 28, DemoModel.RESNET18, 112, 32);
        assertEquals(DemoModel.RESNET18, given.model());
        assertEquals(112, given.imageSize());
        assertEquals(32, given.batchSize());

        DemoWorkload resnet20 =
                DemoWorkload.choose(true, 79 * GIB, 28, DemoModel.RESNET20, null, null);
        assertEquals(28, resnet20.imageSize(), "ResNet-20 keeps the dataset's images");
        assertEquals(64, resnet20.batchSize());

        DemoWorkload cpu = DemoWorkload.choose(false, -1, 32, DemoModel.RESNET50, 64, null);
        assertEquals(64, cpu.imageSize());
        assertEquals(64, cpu.batchSize());
        assertTrue(cpu.resized());

        assertEquals(64, DemoWorkload.choose(true, -1, 28, null, null, null).batchSize());
    }

    @Test
    void memoryPerImageScalesWithThePixels() {
        assertEquals(
                DemoWorkload.RESNET50_BYTES_PER_IMAGE_224 / 4,
                DemoWorkload.bytesPerImage(DemoModel.RESNET50, 112));
        assertTrue(
                DemoWorkload.bytesPerImage(DemoModel.RESNET18, 224)
                        < DemoWorkload.bytesPerImage(DemoModel.RESNET50, 224));
    }
}
