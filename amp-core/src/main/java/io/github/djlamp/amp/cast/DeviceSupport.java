package io.github.djlamp.amp.cast;

import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether a device can run a policy: an error where it cannot, a warning where it is slow, once per
 * device and precision for the process (DJL's {@code EasyHpo} makes a trainer a trial).
 */
final class DeviceSupport {

    private static final Logger logger = LoggerFactory.getLogger(DeviceSupport.class);

    private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

    private DeviceSupport() {}

    /**
     * Checks a concrete policy against a device.
     *
     * @return whether this call warned that the device is slow in the policy's precision
     * @throws AmpException when the device cannot compute in the policy's precision
     */
    static boolean check(PrecisionPolicy policy, DeviceCapabilities caps) {
        Precision compute = policy.getComputePrecision();
        if (!caps.isSupported(compute)) {
            String alternative =
                    caps.isSupported(Precision.FP16) && compute != Precision.FP16
                            ? " or \"mixed_float16\""
                            : "";
            throw new AmpException(
                    "The policy "
                            + policy
                            + " computes in "
                            + compute.canonicalName()
                            + ", which "
                            + caps.getDevice()
                            + " cannot compute in ("
                            + caps.getReason()
                            + "). Use the policy \"auto\" (here: "
                            + caps.getRecommended().canonicalName()
                            + ")"
                            + alternative
                            + ".");
        }
        if (caps.isFast(compute)) {
            return false;
        }
        boolean first = WARNED.add(caps.getDevice() + "|" + compute);
        String message =
                "djl-amp: {} computes in {} on {}, where it is slower than fp32 ({});"
                        + " the policy \"auto\" would choose {}";
        Object[] arguments = {
            policy,
            compute.canonicalName(),
            caps.getDevice(),
            caps.getReason(),
            caps.getRecommended().canonicalName()
        };
        if (first) {
            logger.warn(message, arguments);
        } else {
            logger.debug(message, arguments);
        }
        return first;
    }
}
