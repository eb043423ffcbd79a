package io.github.djlamp.amp.pytorch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Host reads of device values must not leave anything behind on the array's manager.
 *
 * <p>On a GPU, DJL copies a device array to the host with {@code toDevice}, and {@code JniUtils.to}
 * attaches the copy to a new sub-manager of the array's manager whenever the target device differs
 * from that manager's device. The same happens on a CPU-only machine for an array whose manager is
 * declared for another device: that is how this test reproduces the GPU leak without a GPU.
 */
class HostReadTest {

    private static final int READS = 25;

    private NDManager base;
    private AmpBackend backend;

    @BeforeEach
    void setUp() {
        base = NDManager.newBaseManager(Device.cpu(), "PyTorch");
        backend = AmpBackends.forManager(base);
    }

    @AfterEach
    void tearDown() {
        base.close();
    }

    /** A long-lived manager on a (declared) GPU holding one CPU array, like the scaler's state. */
    private NDArray flagOnAGpuManager(NDManager gpuManager, float value) {
        NDArray flag = base.create(new float[] {value});
        flag.attach(gpuManager);
        return flag;
    }

    @Test
    void readingADeviceFlagLeavesItsManagerAsItWas() {
        NDManager longLived = base.newSubManager(Device.gpu(0));
        NDArray flag = flagOnAGpuManager(longLived, 1f);
        int arrays = longLived.getManagedArrays().size();
        String resources = resourceCount(longLived);
        for (int i = 0; i < READS; i++) {
            assertEquals(1f, backend.readFloat(flag));
        }
        assertEquals(arrays, longLived.getManagedArrays().size(), "arrays under the manager");
        assertEquals(resources, resourceCount(longLived), "arrays and sub-managers");
    }

    @Test
    void djlsOwnDeviceToHostCopyLeaksThere() {
        // the control: the copy DJL makes for a host read of a GPU array does leak on this setup,
        // so the test above would see a read that went through it
        NDManager longLived = base.newSubManager(Device.gpu(0));
        NDArray flag = flagOnAGpuManager(longLived, 1f);
        int arrays = longLived.getManagedArrays().size();
        assertEquals(1f, flag.toDevice(Device.cpu(), true).getFloat(0));
        assertNotEquals(arrays, longLived.getManagedArrays().size());
    }

    @Test
    void readsAnyPrecisionAndShape() {
        assertEquals(2.5f, backend.readFloat(base.create(2.5f)));
        assertEquals(-3f, backend.readFloat(base.create(new float[][] {{-3f, 4f}})));
        NDArray brain = backend.cast(base.create(0.5f), Precision.BF16, base);
        assertEquals(0.5f, backend.readFloat(brain));
        assertEquals(7f, backend.readFloat(base.create(7)));
    }

    private static String resourceCount(NDManager manager) {
        // DJL's BaseNDManager.toString ends with its count of resources (arrays and sub-managers)
        String text = manager.toString();
        return text.substring(text.lastIndexOf(':') + 1).trim();
    }
}
