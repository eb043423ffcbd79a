package io.github.djlamp.amp.cast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Model;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtSymbolBlock;
import ai.djl.pytorch.jni.JniUtils;
import ai.djl.training.ParameterStore;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.github.djlamp.amp.Amp;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How much of a traced module's convolution, linear and matrix-product arithmetic libtorch's
 * autocast puts in 16 bits, read from libtorch's own profiler (which records shapes, not types).
 * Under eager autocast the TorchScript interpreter casts the operands of each operation on
 * autocast's lower-precision list with {@code aten::_autocast_to_reduced_precision} calls right
 * before it (eager code: inside it): an operation counts as 16-bit when such a call lies between
 * the previous matrix operation and its own end.
 */
class EngineAutocastShareTest {

    private static final Set<String> MATRIX_OPS =
            Set.of(
                    "aten::linear",
                    "aten::matmul",
                    "aten::bmm",
                    "aten::mm",
                    "aten::addmm",
                    "aten::conv2d",
                    "aten::convolution",
                    "aten::_convolution");

    @TempDir Path dir;

    /** One operation of the trace: its interval, name and input shapes. */
    private record Op(String name, double start, double end, JsonArray shapes) {
        boolean encloses(Op other) {
            return other != this && start <= other.start && other.end <= end;
        }
    }

    @Test
    void autocastPutsTheModulesMatrixArithmeticIn16Bits() throws Exception {
        for (String fixture : List.of("traced_cnn", "traced_encoder")) {
            Shape input =
                    "traced_cnn".equals(fixture) ? new Shape(8, 3, 16, 16) : new Shape(8, 8, 16);
            double share = lowShare(fixture, input, "mixed_bfloat16");
            System.out.printf(
                    "%s: %.1f%% of conv/linear/matmul FLOPs in 16 bits%n", fixture, 100 * share);
            assertTrue(share >= 0.9, fixture + ": " + share);
            // the measure sees fp32 too: the module kept out of autocast by an override
            String fp32 = "mixed_bfloat16[class:" + PtSymbolBlock.class.getName() + "=fp32]";
            assertEquals(0.0, lowShare(fixture, input, fp32), fixture + " under " + fp32);
        }
    }

    private double lowShare(String fixture, Shape input, String policy) throws Exception {
        Path fixtures =
                Path.of(getClass().getResource("/torchscript/" + fixture + ".pt").toURI())
                        .getParent();
        Path trace = dir.resolve(fixture + "-" + policy.hashCode() + ".json");
        try (Model model = Model.newInstance(fixture, "PyTorch");
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            model.load(fixtures, fixture, Map.of("trainParam", "true"));
            MixedPrecisionBlock wrapped = Amp.wrap(model.getBlock(), policy);
            wrapped.initialize(manager, DataType.FLOAT32, input);
            NDArray x = manager.randomNormal(input);
            ParameterStore store = new ParameterStore(manager, false);
            wrapped.forward(store, new NDList(x), false); // the first call's warm-up
            JniUtils.startProfile(false, true, false);
            try {
                wrapped.forward(store, new NDList(x), false);
            } finally {
                JniUtils.stopProfile(trace.toString());
            }
        }
        List<Op> ops = new ArrayList<>();
        List<Op> casts = new ArrayList<>();
        try (Reader reader = Files.newBufferedReader(trace)) {
            for (JsonElement element : JsonParser.parseReader(reader).getAsJsonArray()) {
                JsonObject event = element.getAsJsonObject();
                String name = event.get("name").getAsString();
                double start = event.get("ts").getAsDouble();
                Op op =
                        new Op(
                                name,
                                start,
                                start + event.get("dur").getAsDouble(),
                                event.getAsJsonArray("shape"));
                if (MATRIX_OPS.contains(name)) {
                    ops.add(op);
                } else if ("aten::_autocast_to_reduced_precision".equals(name)) {
                    casts.add(op);
                }
            }
        }
        ops.sort(Comparator.comparingDouble(Op::start));
        double low = 0;
        double all = 0;
        double previousEnd = Double.NEGATIVE_INFINITY;
        for (Op op : ops) {
            if (ops.stream().anyMatch(outer -> outer.encloses(op))) {
                continue; // inside another matrix operation: counted there
            }
            double flops = flops(op);
            all += flops;
            double after = previousEnd;
            if (casts.stream().anyMatch(c -> c.start > after && c.start < op.end)) {
                low += flops;
            }
            previousEnd = op.end;
        }
        assertTrue(all > 0, "no matrix operation in the trace of " + fixture);
        return low / all;
    }

    /** Multiply-adds times 2; a convolution's counted at stride 1 (its weight in the share). */
    private static double flops(Op op) {
        int first = "aten::addmm".equals(op.name) ? 1 : 0; // addmm(bias, a, b)
        long[] a = dims(op.shapes.get(first).getAsJsonArray());
        long[] b = dims(op.shapes.get(first + 1).getAsJsonArray());
        double inputSize = 1;
        for (long d : a) {
            inputSize *= d;
        }
        return switch (op.name) {
            case "aten::linear" -> 2 * inputSize * b[0];
            case "aten::conv2d", "aten::convolution", "aten::_convolution" ->
                    2 * (inputSize / a[1]) * b[0] * b[1] * b[2] * b[3];
            default -> 2 * inputSize * b[b.length - 1];
        };
    }

    private static long[] dims(JsonArray shape) {
        long[] dims = new long[shape.size()];
        for (int i = 0; i < dims.length; i++) {
            dims[i] = shape.get(i).getAsLong();
        }
        return dims;
    }
}
