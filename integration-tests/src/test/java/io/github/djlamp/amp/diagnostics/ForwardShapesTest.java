package io.github.djlamp.amp.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.convolutional.Conv2d;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.pooling.Pool;
import ai.djl.training.ParameterStore;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The report's GEMM dimensions against a real forward pass: each layer's M, N and K recomputed from
 * the arrays it actually receives and returns and from its initialized weight.
 */
class ForwardShapesTest {

    private static SequentialBlock smallNet() {
        return new SequentialBlock()
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(5, 5))
                                .optStride(new Shape(2, 2))
                                .optPadding(new Shape(1, 1))
                                .setFilters(12)
                                .build())
                .add(BatchNorm.builder().build())
                .add(Activation.reluBlock())
                .add(Pool.maxPool2dBlock(new Shape(2, 2)))
                .add(
                        Conv2d.builder()
                                .setKernelShape(new Shape(3, 3))
                                .optPadding(new Shape(1, 1))
                                .optDilation(new Shape(1, 1))
                                .setFilters(24)
                                .optGroups(3)
                                .build())
                .add(Blocks.batchFlattenBlock())
                .add(Linear.builder().setUnits(30).build())
                .add(Activation.reluBlock())
                .add(Linear.builder().setUnits(10).build());
    }

    @Test
    void gemmDimensionsMatchTheArraysOfARealForwardPass() {
        SequentialBlock net = smallNet();
        Shape input = new Shape(6, 3, 33, 33);
        AlignmentReport report = AlignmentReport.of(net, PrecisionPolicy.mixedFloat16(), input);
        try (NDManager manager = NDManager.newBaseManager()) {
            net.initialize(manager, DataType.FLOAT32, input);
            ParameterStore store = new ParameterStore(manager, false);
            List<GemmShape> actual = new ArrayList<>();
            List<String> paths = new ArrayList<>();
            NDList x = new NDList(manager.randomNormal(input));
            for (Pair<String, Block> child : net.getChildren()) {
                Block layer = child.getValue();
                NDList y = layer.forward(store, x, false);
                NDArray in = x.head();
                NDArray out = y.head();
                if (layer instanceof Conv2d || layer instanceof Linear) {
                    Shape weight = layer.getDirectParameters().get("weight").getArray().getShape();
                    long n = out.getShape().get(1);
                    if (layer instanceof Conv2d) {
                        // M: every output position of every sample; K: one filter's weights
                        long m = out.size() / n;
                        long k = weight.slice(1).size();
                        actual.add(new GemmShape(m, n, k));
                    } else {
                        long k = weight.get(1);
                        actual.add(new GemmShape(in.size() / k, weight.get(0), k));
                    }
                    paths.add(child.getKey());
                }
                x = y;
            }
            assertEquals(paths, report.getEntries().stream().map(AlignmentEntry::getPath).toList());
            assertEquals(
                    actual,
                    report.getEntries().stream().map(AlignmentEntry::getGemmShape).toList());
        }
        // and a few by hand: (33 + 2 - 4 - 1) / 2 + 1 = 16, pooled to 8
        assertEquals(new GemmShape(6 * 16 * 16, 12, 75), report.getEntries().get(0).getGemmShape());
        assertEquals(
                new GemmShape(6 * 8 * 8, 24, 4 * 9), report.getEntries().get(1).getGemmShape());
        assertEquals(new GemmShape(6, 30, 24 * 64), report.getEntries().get(2).getGemmShape());
    }

    @Test
    void initializedBlockIsCheckedAgainstTheShapes() {
        SequentialBlock mlp =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(64).build())
                        .add(Linear.builder().setUnits(10).build());
        try (NDManager manager = NDManager.newBaseManager()) {
            mlp.initialize(manager, DataType.FLOAT32, new Shape(1, 100));
            // another batch size is fine
            AlignmentReport report =
                    AlignmentReport.of(mlp, PrecisionPolicy.mixedFloat16(), new Shape(32, 100));
            assertEquals(new GemmShape(32, 64, 100), report.getEntries().get(0).getGemmShape());
            // other input features are not
            String message =
                    assertThrows(
                                    IllegalArgumentException.class,
                                    () ->
                                            AlignmentReport.of(
                                                    mlp,
                                                    PrecisionPolicy.mixedFloat16(),
                                                    new Shape(32, 50)))
                            .getMessage();
            assertTrue(
                    message.contains(
                            "Linear at '01Linear' was initialized for 100 input features, but the"
                                    + " input shapes give it 50"),
                    message);
        }
        Block conv = Conv2d.builder().setKernelShape(new Shape(3, 3)).setFilters(8).build();
        try (NDManager manager = NDManager.newBaseManager()) {
            conv.initialize(manager, DataType.FLOAT32, new Shape(1, 3, 8, 8));
            String message =
                    assertThrows(
                                    IllegalArgumentException.class,
                                    () ->
                                            AlignmentReport.of(
                                                    conv,
                                                    PrecisionPolicy.mixedFloat16(),
                                                    new Shape(4, 1, 8, 8)))
                            .getMessage();
            assertTrue(message.contains("was initialized for 3 input channels"), message);
        }
    }

    @Test
    void shapeFailureInsideALambdaNamesTheBlock() {
        SequentialBlock net =
                new SequentialBlock()
                        .add(Pool.maxPool2dBlock(new Shape(2, 2)))
                        .add(Linear.builder().setUnits(8).build());
        String message =
                assertThrows(
                                IllegalArgumentException.class,
                                () ->
                                        AlignmentReport.of(
                                                net,
                                                PrecisionPolicy.mixedFloat16(),
                                                new Shape(8, 16)))
                        .getMessage();
        assertTrue(
                message.startsWith(
                        "Cannot compute the output shapes of LambdaBlock at '01LambdaBlock' for"
                                + " its input [(8, 16)]"),
                message);
        assertTrue(message.contains("batch dimension first"), message);
    }
}
