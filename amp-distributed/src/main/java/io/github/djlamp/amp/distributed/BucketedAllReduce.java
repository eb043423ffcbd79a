package io.github.djlamp.amp.distributed;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import io.github.djlamp.amp.scale.GradientSet;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.train.GradientReducer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Replaces every rank's gradients by their mean over the ranks, in a few large all-reduces.
 *
 * <p>The gradients of each device are packed, in parameter order, into buckets of about {@link
 * #getBucketBytes()} (one concatenation each), and each bucket is summed across ranks by one {@code
 * MPI_Allreduce} straight in the bucket tensor's own memory (on CPU, {@code toByteBuffer(true)} is
 * that memory; CUDA buckets are staged through the host), divided by the number of ranks and copied
 * back into the gradients in one call. Few large messages instead of one per parameter: MPI's
 * per-call latency is paid a few times a step, not hundreds.
 *
 * <p>Every rank receives the same sums, so the fused unscale-and-check that follows sees the same
 * gradients everywhere: an Inf or NaN on any rank becomes non-finite on all of them, and all skip
 * the step and back off the scale alike.
 */
public final class BucketedAllReduce implements GradientReducer {

    /** The default bucket size: 25 MiB, as PyTorch's DistributedDataParallel. */
    public static final long DEFAULT_BUCKET_BYTES = 25L << 20;

    private final World world;
    private final long bucketBytes;
    private final boolean stageCpuBuckets;
    private long steps;
    private long stagedBuckets;

    /**
     * Creates the reducer.
     *
     * @param world the ranks to average over
     * @param bucketBytes the bucket size in bytes; 0 makes one all-reduce per parameter
     * @throws IllegalArgumentException when {@code bucketBytes} is negative
     */
    public BucketedAllReduce(World world, long bucketBytes) {
        this(world, bucketBytes, false);
    }

    /**
     * Creates the reducer; {@code stageCpuBuckets} sends CPU buckets through the host staging that
     * device buckets take (a copy out, the all-reduce on the copy, a copy back), so that path runs
     * on machines without a GPU.
     */
    BucketedAllReduce(World world, long bucketBytes, boolean stageCpuBuckets) {
        if (bucketBytes < 0) {
            throw new IllegalArgumentException(
                    "bucketBytes must be >= 0 (0: one all-reduce per parameter), got "
                            + bucketBytes);
        }
        this.world = world;
        this.bucketBytes = bucketBytes;
        this.stageCpuBuckets = stageCpuBuckets;
    }

    /**
     * Returns the bucket size.
     *
     * @return bytes per bucket
     */
    public long getBucketBytes() {
        return bucketBytes;
    }

    /** The number of buckets that went through host staging so far. */
    long getStagedBuckets() {
        return stagedBuckets;
    }

    /** {@inheritDoc} */
    @Override
    public void reduce(GradientSet gradients, NDManager stepManager) {
        steps++;
        if (world.getSize() == 1) {
            return;
        }
        for (NDList group : gradients.byReplica().values()) {
            List<NDList> buckets = buckets(group);
            for (int i = 0; i < buckets.size(); i++) {
                reduceBucket(buckets.get(i), stepManager, i, buckets.size());
            }
        }
    }

    /**
     * Splits gradients into buckets of about {@code bucketBytes}, in order.
     *
     * @param gradients one device's gradients
     * @return the buckets
     */
    List<NDList> buckets(NDList gradients) {
        List<NDList> buckets = new ArrayList<>();
        NDList bucket = new NDList();
        long bytes = 0;
        for (NDArray gradient : gradients) {
            if (gradient.getDataType() != DataType.FLOAT32) {
                throw new IllegalStateException(
                        "Data-parallel reduction needs fp32 gradients (djl-amp keeps fp32 master"
                                + " weights), got "
                                + gradient.getDataType()
                                + "; keep the model's parameters fp32");
            }
            long size = gradient.size() * Float.BYTES;
            if (!bucket.isEmpty() && bytes + size > bucketBytes) {
                buckets.add(bucket);
                bucket = new NDList();
                bytes = 0;
            }
            bucket.add(gradient);
            bytes += size;
        }
        if (!bucket.isEmpty()) {
            buckets.add(bucket);
        }
        return buckets;
    }

    private void reduceBucket(NDList bucket, NDManager stepManager, int index, int count) {
        NDList flats = new NDList(bucket.size());
        long[] ends = new long[bucket.size()];
        long total = 0;
        for (int i = 0; i < bucket.size(); i++) {
            NDArray flat = bucket.get(i).reshape(-1);
            flat.attach(stepManager);
            flats.add(flat);
            total += flat.size();
            ends[i] = total;
        }
        if (total > Integer.MAX_VALUE) {
            throw new IllegalStateException(
                    "A gradient of " + total + " floats exceeds MPI's count limit of 2^31 - 1");
        }
        NDArray packed = flats.size() == 1 ? flats.get(0).duplicate() : NDArrays.concat(flats);
        packed.attach(stepManager);
        Device device = packed.getDevice();
        boolean onCpu = Device.cpu().equals(device);
        boolean staged = !onCpu || stageCpuBuckets;
        NDArray host = packed;
        if (staged) {
            // host staging: MPI reads and writes host memory (NCCL would reduce on the device)
            host = onCpu ? packed.duplicate() : packed.toDevice(Device.cpu(), true);
            host.attach(stepManager);
            stagedBuckets++;
        }
        ByteBuffer memory = host.toByteBuffer(true);
        world.allReduceSum(
                memory,
                (int) total,
                "gradient all-reduce, bucket " + (index + 1) + " of " + count + ", step " + steps);
        host.muli(1f / world.getSize());
        NDArray back = host;
        if (staged) {
            back = onCpu ? host.duplicate() : host.toDevice(device, true);
            back.attach(stepManager);
        }
        NDList parts =
                bucket.size() == 1
                        ? new NDList(back)
                        : back.split(Arrays.copyOf(ends, ends.length - 1));
        NDList shaped = new NDList(parts.size());
        for (int i = 0; i < parts.size(); i++) {
            NDArray part = parts.get(i).reshape(bucket.get(i).getShape());
            if (parts.get(i) != back) {
                parts.get(i).attach(stepManager);
            }
            part.attach(stepManager);
            shaped.add(part);
        }
        AmpBackends.forManager(stepManager).copy(bucket, shaped);
    }
}
