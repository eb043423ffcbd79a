package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.object_detection.yolo.YOLOV3;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.training.ParameterStore;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.cast.ArithmeticShare;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.diagnostics.AlignmentReport;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * DJL's YOLOv3 (model zoo; DJL's TrainPikachuWithYOLOV3) computes in bf16 with the two lines alone.
 * It was one fp32 unit, 0% of its arithmetic in 16 bits: a DJL class with a forward of its own
 * holding upsampling lambdas that are unsafe on bf16. djl-amp now reads its forward and runs it
 * over its children: DarkNet-53 (a SequentialBlock returning its intermediate outputs), its
 * residual joins and its heads in bf16, the upsampling in fp32.
 */
class YoloV3In16BitsTest {

    private static final int SIZE = 64;

    @Test
    void itsConvolutionsComputeInBf16AndFloat32IsBitwisePlainDjl() {
        try (NDManager manager = NDManager.newBaseManager("PyTorch")) {
            Engine.getInstance().setRandomSeed(1234);
            Block yolo = YOLOV3.builder().setNumClasses(1).build();
            yolo.initialize(manager, DataType.FLOAT32, new Shape(2, 3, SIZE, SIZE));
            List<float[]> plain = forward(yolo, manager, true);
            assertEquals(3, plain.size(), "three detection scales");
            List<float[]> fp32 = forward(Amp.wrap(yolo, "float32"), manager, true);
            for (int i = 0; i < plain.size(); i++) {
                assertArrayEquals(plain.get(i), fp32.get(i), "float32, output " + i);
            }

            // compared in inference: BatchNorm over two 2x2 maps in training makes the untrained
            // network chaotic (0.4% noise on fp32's input moves its outputs by 32-69%)
            List<float[]> reference = forward(yolo, manager, false);
            MixedPrecisionBlock bf16Block = Amp.wrap(yolo, "mixed_bfloat16");
            List<float[]> bf16 = forward(bf16Block, manager, false);
            ArithmeticShare share = bf16Block.getArithmeticShare(manager.getDevice());
            System.out.println("DJL's YOLOv3 under mixed_bfloat16: " + share);
            assertEquals(1.0, share.getLowShare(), 1e-9, share.toString());
            // the alignment report cannot walk a block's own code: it lists the block as one
            // layer of unknown kind (it said that no layer computed in 16 bits)
            String summary =
                    AlignmentReport.of(bf16Block, new Shape(2, 3, SIZE, SIZE)).getSummary();
            assertTrue(summary.startsWith("0 of 1 16-bit layers aligned"), summary);
            for (int i = 0; i < plain.size(); i++) {
                double error = error(reference.get(i), bf16.get(i));
                assertTrue(error < 0.03, "bf16, output " + i + ": " + error);
            }
        }
    }

    /** The outputs of one forward. */
    private static List<float[]> forward(Block block, NDManager manager, boolean training) {
        List<float[]> result = new ArrayList<>();
        try (NDManager batch = manager.newSubManager()) {
            NDArray x =
                    batch.arange(2f * 3 * SIZE * SIZE)
                            .reshape(2, 3, SIZE, SIZE)
                            .div(batch.full(new Shape(), 97f))
                            .sin();
            NDList out = block.forward(new ParameterStore(manager, false), new NDList(x), training);
            for (NDArray o : out) {
                result.add(o.toType(DataType.FLOAT32, false).toFloatArray());
            }
        }
        return result;
    }

    /** ||a - b|| / ||a||. */
    private static double error(float[] expected, float[] actual) {
        double difference = 0;
        double norm = 0;
        for (int i = 0; i < expected.length; i++) {
            difference += Math.pow(actual[i] - expected[i], 2);
            norm += Math.pow(expected[i], 2);
        }
        return Math.sqrt(difference / norm);
    }
}
