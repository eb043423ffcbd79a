package io.github.djlamp.amp.doctor;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * libtorch's CUDA caching allocator, emptied through DJL's PyTorch engine ({@code
 * ai.djl.pytorch.jni.JniUtils.emptyCudaCache()}, which calls {@code
 * c10::cuda::CUDACachingAllocator::emptyCache()}). Found by reflection: the doctor depends on DJL's
 * API only, not on an engine.
 *
 * <p>libtorch keeps the device memory of freed tensors for reuse instead of handing it back to
 * CUDA, so without emptying, the memory a run measures includes what earlier runs left cached.
 */
final class LibtorchCudaCache {

    static final String ENGINE_NAME = "PyTorch";

    private static final String JNI_UTILS = "ai.djl.pytorch.jni.JniUtils";

    private LibtorchCudaCache() {}

    /**
     * Returns what empties the cache for an engine, or null where nothing can: another engine, or
     * DJL's PyTorch engine not on the class path.
     *
     * @param engineName the engine the training runs on
     * @return the emptying call, or null
     */
    static Runnable emptier(String engineName) {
        if (!ENGINE_NAME.equals(engineName)) {
            return null;
        }
        Method method = find();
        if (method == null) {
            return null;
        }
        return () -> invoke(method);
    }

    private static Method find() {
        try {
            return Class.forName(JNI_UTILS, false, LibtorchCudaCache.class.getClassLoader())
                    .getMethod("emptyCudaCache");
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }

    private static void invoke(Method method) {
        try {
            method.invoke(null);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw new IllegalStateException(
                    "libtorch's emptyCudaCache failed: " + cause.getMessage(), cause);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException("libtorch's emptyCudaCache is not accessible", e);
        }
    }
}
