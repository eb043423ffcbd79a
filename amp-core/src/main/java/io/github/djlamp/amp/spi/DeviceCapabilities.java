package io.github.djlamp.amp.spi;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import java.util.Objects;

/**
 * What a device computes usefully in reduced precision, and the precision djl-amp recommends for it
 * with the reason.
 */
public final class DeviceCapabilities {

    private final Device device;
    private final boolean fp16Supported;
    private final boolean fp16Fast;
    private final boolean bf16Supported;
    private final boolean bf16Fast;
    private final Precision recommended;
    private final String reason;

    /**
     * Creates a capability record for a device that can compute in both 16-bit precisions.
     *
     * @param device the device described
     * @param fp16Fast whether fp16 compute is faster than fp32 there
     * @param bf16Fast whether bf16 compute is faster than fp32 there
     * @param recommended the precision to train in
     * @param reason why, in one sentence a user can read
     */
    public DeviceCapabilities(
            Device device,
            boolean fp16Fast,
            boolean bf16Fast,
            Precision recommended,
            String reason) {
        this(device, true, fp16Fast, true, bf16Fast, recommended, reason);
    }

    /**
     * Creates a capability record.
     *
     * @param device the device described
     * @param fp16Supported whether the device can compute in fp16 at all
     * @param fp16Fast whether fp16 compute is faster than fp32 there
     * @param bf16Supported whether the device can compute in bf16 at all
     * @param bf16Fast whether bf16 compute is faster than fp32 there
     * @param recommended the precision to train in
     * @param reason why, in one sentence a user can read
     */
    public DeviceCapabilities(
            Device device,
            boolean fp16Supported,
            boolean fp16Fast,
            boolean bf16Supported,
            boolean bf16Fast,
            Precision recommended,
            String reason) {
        this.device = Objects.requireNonNull(device, "device");
        this.fp16Supported = fp16Supported;
        this.fp16Fast = fp16Fast && fp16Supported;
        this.bf16Supported = bf16Supported;
        this.bf16Fast = bf16Fast && bf16Supported;
        this.recommended = Objects.requireNonNull(recommended, "recommended");
        this.reason = Objects.requireNonNull(reason, "reason");
    }

    /**
     * Returns the device described.
     *
     * @return the device
     */
    public Device getDevice() {
        return device;
    }

    /**
     * Returns whether fp16 compute is faster than fp32 on this device (Tensor Cores).
     *
     * @return true when fp16 pays off
     */
    public boolean isFp16Fast() {
        return fp16Fast;
    }

    /**
     * Returns whether bf16 compute is faster than fp32 on this device.
     *
     * @return true when bf16 pays off
     */
    public boolean isBf16Fast() {
        return bf16Fast;
    }

    /**
     * Returns whether the device can compute in {@code precision} at all.
     *
     * @param precision a precision
     * @return true for FP32 always, and for FP16/BF16 where the device has them
     */
    public boolean isSupported(Precision precision) {
        return switch (precision) {
            case FP32 -> true;
            case FP16 -> fp16Supported;
            case BF16 -> bf16Supported;
        };
    }

    /**
     * Returns whether {@code precision} is worth computing in on this device.
     *
     * @param precision a precision
     * @return true for FP32 always, and for FP16/BF16 where they are fast
     */
    public boolean isFast(Precision precision) {
        return switch (precision) {
            case FP32 -> true;
            case FP16 -> fp16Fast;
            case BF16 -> bf16Fast;
        };
    }

    /**
     * Returns the precision djl-amp recommends for training on this device.
     *
     * @return the recommended precision
     */
    public Precision getRecommended() {
        return recommended;
    }

    /**
     * Returns why {@link #getRecommended()} was chosen.
     *
     * @return the reason
     */
    public String getReason() {
        return reason;
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return device
                + ": fp16 "
                + (fp16Fast ? "fast" : "slow")
                + ", bf16 "
                + (bf16Fast ? "fast" : "slow")
                + "; recommended "
                + recommended.shortName()
                + " ("
                + reason
                + ")";
    }
}
