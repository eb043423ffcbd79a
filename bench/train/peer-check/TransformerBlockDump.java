import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * DJL's side of bench/train/peer-check/check.sh: one TransformerEncoderBlock(16, 4, 32, 0, gelu)
 * with random parameters and running statistics, one training-mode forward on a random (3, 5, 16)
 * input; writes the parameters before, the input, the output and the parameters after (running
 * statistics updated) as JSON to the path given. Run with java's single-file source launcher.
 */
public class TransformerBlockDump {
    public static void main(String[] args) throws Exception {
        try (NDManager m = NDManager.newBaseManager()) {
            Block block = new TransformerEncoderBlock(16, 4, 32, 0f, Activation::gelu);
            block.initialize(m, DataType.FLOAT32, new Shape(3, 5, 16));
            NDArray x = m.randomNormal(new Shape(3, 5, 16));
            StringBuilder before = new StringBuilder();
            for (Pair<String, Parameter> p : block.getParameters()) {
                NDArray a = p.getValue().getArray();
                if (p.getKey().endsWith("runningVar")) {
                    a.set(m.randomUniform(0.5f, 1.5f, a.getShape()).toFloatArray());
                } else {
                    a.set(m.randomNormal(a.getShape()).mul(0.3f).toFloatArray());
                }
                before.append(before.length() == 0 ? "" : ",").append(Arrays.toString(a.toFloatArray()));
            }
            NDArray y = block.forward(new ParameterStore(m, false), new NDList(x), true).head();
            StringBuilder after = new StringBuilder();
            for (Pair<String, Parameter> p : block.getParameters()) {
                after.append(after.length() == 0 ? "" : ",")
                        .append("{\"name\":\"").append(p.getKey()).append("\",\"data\":")
                        .append(Arrays.toString(p.getValue().getArray().toFloatArray())).append('}');
            }
            Files.writeString(
                    Path.of(args[0]),
                    "{\"before\":[" + before + "],\"after\":[" + after + "],\"x\":"
                            + Arrays.toString(x.toFloatArray()) + ",\"y\":"
                            + Arrays.toString(y.toFloatArray()) + "}");
        }
    }
}
