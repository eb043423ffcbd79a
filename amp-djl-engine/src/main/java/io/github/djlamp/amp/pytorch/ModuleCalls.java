package io.github.djlamp.amp.pytorch;

import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.IValue;
import ai.djl.pytorch.jni.IValueUtils;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * A TorchScript method called with its arguments given as values, under the thread's grad mode,
 * through the native call DJL's {@code IValueUtils} makes. DJL's public ways in either take the
 * arguments from the arrays' names (so two threads calling with the same parameter arrays would
 * rename them under each other) or turn autograd off ({@code IValueUtils.runMethod}); the native
 * call itself ({@code PyTorchLibrary.moduleRunMethod}, package-private in DJL 0.35.1 and 0.36.0)
 * takes the values and whether to record, and is reached here by reflection. Where this DJL has no
 * such method, {@link #available()} says so and nothing is compiled.
 */
final class ModuleCalls {

    private static final MethodHandle RUN;
    private static final MethodHandle WRAP;
    private static final boolean CUDA_STREAM;

    static {
        MethodHandle run = null;
        MethodHandle wrap = null;
        boolean cudaStream = false;
        try {
            Class<?> library = Class.forName("ai.djl.pytorch.jni.PyTorchLibrary");
            MethodHandles.Lookup inLibrary =
                    MethodHandles.privateLookupIn(library, MethodHandles.lookup());
            Object instance = inLibrary.findStaticGetter(library, "LIB", library).invoke();
            run =
                    inLibrary
                            .findVirtual(
                                    library,
                                    "moduleRunMethod",
                                    MethodType.methodType(
                                            long.class,
                                            long.class,
                                            String.class,
                                            long[].class,
                                            boolean.class,
                                            boolean.class))
                            .bindTo(instance);
            MethodHandles.Lookup inValue =
                    MethodHandles.privateLookupIn(IValue.class, MethodHandles.lookup());
            wrap =
                    inValue.findConstructor(
                            IValue.class, MethodType.methodType(void.class, long.class));
            MethodHandles.Lookup inUtils =
                    MethodHandles.privateLookupIn(IValueUtils.class, MethodHandles.lookup());
            cudaStream =
                    (boolean)
                            inUtils.findStaticGetter(
                                            IValueUtils.class, "CUDA_STREAM", boolean.class)
                                    .invoke();
        } catch (Throwable e) {
            run = null;
            wrap = null;
        }
        RUN = run;
        WRAP = wrap;
        CUDA_STREAM = cudaStream;
    }

    private ModuleCalls() {}

    /** Whether this DJL offers the native call. */
    static boolean available() {
        return RUN != null;
    }

    /**
     * Calls {@code method(inputs..., parameters)} of {@code module} under the thread's grad mode.
     *
     * @return its tensor result, attached to the first input's manager
     */
    static PtNDArray call(
            PtSymbolBlock module, String method, PtNDArray[] inputs, PtNDArray[] parameters) {
        IValue[] arguments = new IValue[inputs.length + 1];
        try {
            long[] handles = new long[arguments.length];
            for (int i = 0; i < inputs.length; i++) {
                arguments[i] = IValue.from(inputs[i]);
                handles[i] = arguments[i].getHandle();
            }
            arguments[inputs.length] = IValue.listFrom(parameters);
            handles[inputs.length] = arguments[inputs.length].getHandle();
            long result;
            try {
                result =
                        (long)
                                RUN.invokeExact(
                                        module.getHandle().longValue(),
                                        method,
                                        handles,
                                        true,
                                        CUDA_STREAM);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            }
            try (IValue output = wrap(result)) {
                return output.toTensor(inputs[0].getManager());
            }
        } finally {
            for (IValue argument : arguments) {
                if (argument != null) {
                    argument.close();
                }
            }
        }
    }

    private static IValue wrap(long handle) {
        try {
            return (IValue) WRAP.invoke(handle);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
    }
}
