package io.github.djlamp.amp.policy;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.training.GradientCollector;
import io.github.djlamp.amp.bytecode.SafeLambdaBodies;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;

/**
 * Child-JVM program for {@code SafeMembersOnBf16Test}: runs every member {@link
 * SafeLambdaBodies#DJL_MEMBERS} lists on bf16 arrays made by the engine backend, forward and
 * backward to fp32 leaves. A member that passes a bf16 array's data type to native code ends this
 * JVM; the test sees the exit code and the last member printed. Prints "ran KEY" per member and
 * "ALL MEMBERS RAN" at the end.
 */
public final class SafeMembersOnBf16Scenarios {

    private SafeMembersOnBf16Scenarios() {}

    private static final String A = "ai/djl/ndarray/NDArray.";
    private static final String AS = "ai/djl/ndarray/NDArrays.";
    private static final String L = "ai/djl/ndarray/NDList.";
    private static final String ARRAY = "Lai/djl/ndarray/NDArray;";
    private static final String LIST = "Lai/djl/ndarray/NDList;";

    /** Each member's use on two bf16 arrays of shape (2, 3); a result array or null. */
    static Map<String, BiFunction<NDArray, NDArray, Object>> scenarios() {
        Map<String, BiFunction<NDArray, NDArray, Object>> s = new LinkedHashMap<>();
        String binary = "(" + ARRAY + ")" + ARRAY;
        s.put(A + "add" + binary, NDArray::add);
        s.put(A + "sub" + binary, NDArray::sub);
        s.put(A + "mul" + binary, NDArray::mul);
        s.put(A + "div" + binary, NDArray::div);
        s.put(A + "maximum" + binary, NDArray::maximum);
        s.put(A + "minimum" + binary, NDArray::minimum);
        s.put(A + "neg()" + ARRAY, (a, b) -> a.neg());
        s.put(A + "abs()" + ARRAY, (a, b) -> a.abs());
        s.put(A + "reshape([J)" + ARRAY, (a, b) -> a.reshape(3, -1));
        s.put(
                A + "reshape(Lai/djl/ndarray/types/Shape;)" + ARRAY,
                (a, b) -> a.reshape(new Shape(6)));
        s.put(A + "transpose()" + ARRAY, (a, b) -> a.transpose());
        s.put(A + "transpose([I)" + ARRAY, (a, b) -> a.transpose(1, 0));
        s.put(A + "swapAxes(II)" + ARRAY, (a, b) -> a.swapAxes(0, 1));
        s.put(A + "expandDims(I)" + ARRAY, (a, b) -> a.expandDims(0));
        s.put(A + "squeeze(I)" + ARRAY, (a, b) -> a.expandDims(1).squeeze(1));
        s.put(
                A + "squeeze([I)" + ARRAY,
                (a, b) -> a.expandDims(1).expandDims(3).squeeze(new int[] {1, 3}));
        s.put(A + "squeeze()" + ARRAY, (a, b) -> a.expandDims(1).squeeze());
        s.put(A + "flatten()" + ARRAY, (a, b) -> a.flatten());
        s.put(A + "concat(" + ARRAY + "I)" + ARRAY, (a, b) -> a.concat(b, 1));
        s.put(A + "getShape()Lai/djl/ndarray/types/Shape;", (a, b) -> a.getShape());
        // oneHot takes indices and makes fp32 of its own, whatever the other arrays are
        s.put(A + "oneHot(I)" + ARRAY, (a, b) -> a.getManager().arange(3).oneHot(4).mul(a.sum()));
        s.put(
                L + "set(ILjava/lang/Object;)Ljava/lang/Object;",
                (a, b) -> {
                    NDList list = new NDList(a);
                    list.set(0, b);
                    return list.head();
                });
        String ex = "ai/djl/ndarray/internal/NDArrayEx.";
        s.put(
                A + "getNDArrayInternal()Lai/djl/ndarray/internal/NDArrayEx;",
                (a, b) -> a.getNDArrayInternal());
        s.put(ex + "relu()" + ARRAY, (a, b) -> a.sub(b).getNDArrayInternal().relu());
        s.put(ex + "sigmoid()" + ARRAY, (a, b) -> a.getNDArrayInternal().sigmoid());
        s.put(ex + "tanh()" + ARRAY, (a, b) -> a.getNDArrayInternal().tanh());
        s.put(AS + "concat(" + LIST + ")" + ARRAY, (a, b) -> NDArrays.concat(new NDList(a, b)));
        s.put(
                AS + "concat(" + LIST + "I)" + ARRAY,
                (a, b) -> NDArrays.concat(new NDList(a), 1)); // one array: DJL duplicates it
        s.put(AS + "stack(" + LIST + ")" + ARRAY, (a, b) -> NDArrays.stack(new NDList(a, b)));
        s.put(AS + "stack(" + LIST + "I)" + ARRAY, (a, b) -> NDArrays.stack(new NDList(a, b), 2));
        s.put(AS + "add([" + ARRAY + ")" + ARRAY, (a, b) -> NDArrays.add(a, b, a));
        s.put(L + "<init>()V", (a, b) -> new NDList());
        s.put(L + "<init>(I)V", (a, b) -> new NDList(2));
        s.put(L + "<init>([" + ARRAY + ")V", (a, b) -> new NDList(a, b).get(1));
        s.put(L + "<init>(Ljava/util/Collection;)V", (a, b) -> new NDList(List.of(a, b)).head());
        s.put(L + "head()" + ARRAY, (a, b) -> new NDList(a).head());
        s.put(L + "singletonOrThrow()" + ARRAY, (a, b) -> new NDList(b).singletonOrThrow());
        s.put(L + "get(I)Ljava/lang/Object;", (a, b) -> new NDList(a, b).get(0));
        s.put(L + "size()I", (a, b) -> new NDList(a, b).size());
        s.put(L + "isEmpty()Z", (a, b) -> new NDList(a).isEmpty());
        s.put(
                L + "add(Ljava/lang/Object;)Z",
                (a, b) -> {
                    NDList list = new NDList(a);
                    list.add(b);
                    return list.get(1);
                });
        s.put(
                L + "addAll(" + LIST + ")" + LIST,
                (a, b) -> new NDList(a).addAll(new NDList(b)).get(1));
        s.put(L + "subNDList(I)" + LIST, (a, b) -> new NDList(a, b).subNDList(1).head());
        s.put(
                L + "stream()Ljava/util/stream/Stream;",
                (a, b) -> new NDList(a, b).stream().reduce(NDArray::add).orElseThrow());
        s.put(
                L + "iterator()Ljava/util/Iterator;",
                (a, b) -> {
                    Iterator<NDArray> it = new NDList(a, b).iterator();
                    List<NDArray> seen = new ArrayList<>();
                    it.forEachRemaining(seen::add);
                    return seen.get(1);
                });
        return s;
    }

    /**
     * Runs each scenario, forward and backward.
     *
     * @param args unused
     */
    public static void main(String[] args) {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            AmpBackend backend = AmpBackends.forManager(manager);
            for (Map.Entry<String, BiFunction<NDArray, NDArray, Object>> e :
                    scenarios().entrySet()) {
                System.out.println("running " + e.getKey());
                System.out.flush();
                try (NDManager step = manager.newSubManager()) {
                    NDArray x = step.arange(1f, 7f).reshape(2, 3);
                    NDArray y = step.arange(2f, 8f).reshape(2, 3);
                    x.setRequiresGradient(true);
                    y.setRequiresGradient(true);
                    try (GradientCollector collector =
                            Engine.getInstance().newGradientCollector()) {
                        NDArray a = backend.cast(x, Precision.BF16, step);
                        NDArray b = backend.cast(y, Precision.BF16, step);
                        Object result = e.getValue().apply(a, b);
                        // DJL's concat of one array duplicates it without recording: no backward
                        if (result instanceof NDArray
                                && backend.precisionOf((NDArray) result) == Precision.BF16
                                && backend.requiresGradient((NDArray) result)) {
                            NDArray loss =
                                    backend.cast((NDArray) result, Precision.FP32, step).sum();
                            collector.backward(loss);
                            float[] g = x.getGradient().add(y.getGradient()).toFloatArray();
                            for (float v : g) {
                                if (Float.isNaN(v)) {
                                    throw new AssertionError(e.getKey() + ": NaN gradient");
                                }
                            }
                        }
                    }
                }
                System.out.println("ran " + e.getKey());
            }
        }
        System.out.println("ALL MEMBERS RAN");
    }
}
