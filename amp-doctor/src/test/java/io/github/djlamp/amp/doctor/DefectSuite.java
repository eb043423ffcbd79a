package io.github.djlamp.amp.doctor;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import com.sun.jna.Function;
import java.util.List;

/**
 * A child-JVM suite with deliberate defects, for {@link PlatformCheckDefectTest}: a right case, a
 * kernel whose output is deliberately wrong (compared by the real fp32 comparison), a case that
 * kills the JVM with SIGFPE in native code (as oneDNN's 1x1 convolution did: the JVM writes an
 * error file), one that kills it through DJL's bf16 enum (C++ terminate, SIGABRT, no error file),
 * and a right case after them, which only a new child can run.
 */
final class DefectSuite implements PlatformSuite {

    static final LayerSpec SMALL_LINEAR = LayerSpec.linear(8, 4, 16);
    static final LayerSpec SMALL_CONV = LayerSpec.conv(4, 3, 1, 2, 3, 6, 6);

    static final String WRONG = "wrong/conv3x3-off-by-a-quarter";
    static final String SIGFPE = "crash/sigfpe-in-native-code";
    static final String ABORT = "crash/djl-bfloat16-enum";
    static final String AFTER = "fp32/linear-after-the-crashes";

    @Override
    public List<KernelCase> cases() {
        return List.of(
                Fp32Case.of(SMALL_LINEAR, ""),
                new Fp32Case(SMALL_CONV, WRONG, "a convolution whose output is off by 0.25") {
                    @Override
                    NDArray forward(NDArray input, NDArray weight, NDArray bias) {
                        return super.forward(input, weight, bias).add(0.25f);
                    }
                },
                new KernelCase(SIGFPE, "raise(SIGFPE) in libc, as a native kernel's division") {
                    @Override
                    Result run(Context context) {
                        Function.getFunction("c", "raise").invokeInt(new Object[] {8});
                        return Result.right("survived SIGFPE");
                    }
                },
                new KernelCase(ABORT, "DataType.BFLOAT16 handed to DJL's JNI") {
                    @Override
                    Result run(Context context) {
                        context.manager.zeros(new Shape(2), DataType.BFLOAT16);
                        return Result.right("survived DJL's bf16 enum");
                    }
                },
                new Fp32Case(SMALL_LINEAR, AFTER, "a linear layer after the crashes"));
    }
}
