package io.github.djlamp.amp.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.Block;
import ai.djl.nn.Blocks;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.SequentialBlock;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.loss.Loss;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.AmpOptions;
import io.github.djlamp.amp.cast.MixedPrecisionBlock;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Checkpointing;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/**
 * Checkpointing settings at the front door: {@code Amp.configure} refuses a setting that cannot
 * apply to the wrapped model, naming the fix, and leaves the block's setting as it was; the text
 * and {@code Properties} forms read what the builders make.
 */
class CheckpointingSettingsTest {

    /** Configures {@code block} wrapped under fp32 with {@code setting}; returns the wrapper. */
    private static MixedPrecisionBlock configure(Block block, Checkpointing setting) {
        MixedPrecisionBlock wrapped = Amp.wrap(block, "float32");
        Amp.configure(
                new DefaultTrainingConfig(Loss.l2Loss()),
                wrapped,
                AmpOptions.builder().checkpointing(setting).build());
        return wrapped;
    }

    /** Asserts that configuring refuses {@code setting}; returns the message. */
    private static String refused(Block block, Checkpointing setting) {
        MixedPrecisionBlock wrapped = Amp.wrap(block, "float32");
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () ->
                                Amp.configure(
                                        new DefaultTrainingConfig(Loss.l2Loss()),
                                        wrapped,
                                        AmpOptions.builder().checkpointing(setting).build()));
        assertEquals(
                Checkpointing.none(),
                wrapped.getTrainingLink().getCheckpoints().getSetting(),
                "a refused setting is not applied");
        return e.getMessage();
    }

    private static Block withDropout(float rate) {
        return new SequentialBlock()
                .add(Linear.builder().setUnits(8).build())
                .add(
                        new SequentialBlock()
                                .add(Linear.builder().setUnits(8).build())
                                .add(Activation.reluBlock())
                                .add(Dropout.builder().optRate(rate).build()))
                .add(Linear.builder().setUnits(2).build());
    }

    private static Block resNet() {
        return ResNetV1.builder()
                .setImageShape(new Shape(3, 16, 16))
                .setNumLayers(20)
                .setOutSize(4)
                .build();
    }

    @Test
    void aDroppingDropoutInASegmentIsRefusedAndRateZeroIsAccepted() {
        String message = refused(withDropout(0.2f), Checkpointing.stages());
        assertTrue(message.contains("Dropout of rate 0.2"), message);
        assertTrue(message.contains("02SequentialBlock"), message);
        assertTrue(message.contains("dropout 0"), "names the fix: " + message);
        // the same model, its dropping stage left out of the segments
        assertEquals(
                Checkpointing.blocks("path:01Linear"),
                configure(withDropout(0.2f), Checkpointing.blocks("path:01Linear"))
                        .getTrainingLink()
                        .getCheckpoints()
                        .getSetting());
        assertEquals(
                Checkpointing.stages(),
                configure(withDropout(0f), Checkpointing.stages())
                        .getTrainingLink()
                        .getCheckpoints()
                        .getSetting());
    }

    @Test
    void aDropoutInsideATransformerBlockIsFoundAndRefused() {
        Block model =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(16).build())
                        .add(new TransformerEncoderBlock(16, 2, 32, 0.1f, Activation::relu))
                        .add(Linear.builder().setUnits(2).build());
        String message = refused(model, Checkpointing.stages());
        assertTrue(message.contains("02TransformerEncoderBlock"), message);
        assertTrue(message.contains("Dropout of rate 0.1"), message);
    }

    @Test
    void aPathThatMatchesNoBlockIsRefusedListingTheStages() {
        String message = refused(withDropout(0f), Checkpointing.blocks("path:04Linear"));
        assertTrue(message.contains("matches no block"), message);
        assertTrue(message.contains("01Linear, 02SequentialBlock, 03Linear"), message);
    }

    @Test
    void aBlockInsideAResidualUnitIsRefusedNamingTheUnitToCheckpoint() {
        Block resNet = resNet();
        Map<String, Block> all = BlockPaths.walk(resNet);
        String unit = null;
        String inside = null;
        for (Map.Entry<String, Block> e : all.entrySet()) {
            if (unit == null && e.getValue() instanceof ParallelBlock) {
                unit = e.getKey();
            } else if (unit != null && e.getKey().startsWith(unit + BlockPaths.SEPARATOR)) {
                inside = e.getKey(); // the unit's last block, deepest in its branches
            }
        }
        assertTrue(inside != null, "ResNetV1's units are ParallelBlocks: " + all.keySet());
        String message = refused(resNet, Checkpointing.blocks("path:" + inside));
        assertTrue(message.contains("ParallelBlock, whose branches all read"), message);
        assertTrue(message.endsWith("e.g. path:" + unit), "names the unit: " + message);
        // the whole unit is a stage of the root: accepted
        assertEquals(
                Checkpointing.blocks("path:" + unit),
                configure(resNet(), Checkpointing.blocks("path:" + unit))
                        .getTrainingLink()
                        .getCheckpoints()
                        .getSetting());
    }

    @Test
    void aClassFoundOnlyInsideAParallelBlockIsRefused() {
        Block model =
                new SequentialBlock()
                        .add(Linear.builder().setUnits(8).build())
                        .add(
                                new ParallelBlock(
                                        list -> list.get(0),
                                        List.of(
                                                new SequentialBlock()
                                                        .add(Activation.reluBlock())
                                                        .add(Dropout.builder().optRate(0f).build()),
                                                Blocks.identityBlock())))
                        .add(Linear.builder().setUnits(2).build());
        String message = refused(model, Checkpointing.blocks("class:Dropout"));
        assertTrue(message.contains("ParallelBlock, whose branches all read"), message);
        assertTrue(message.contains("path:02ParallelBlock"), message);
    }

    @Test
    void stagesEveryAndAutoOfARootThatIsNoSequentialBlockAreRefused() {
        for (Checkpointing setting :
                new Checkpointing[] {
                    Checkpointing.stages(), Checkpointing.every(2), Checkpointing.auto()
                }) {
            Block root =
                    new ParallelBlock(
                            list -> list.get(0),
                            List.of(
                                    Linear.builder().setUnits(2).build(),
                                    Linear.builder().setUnits(2).build()));
            String message = refused(root, setting);
            assertTrue(message.contains("ai.djl.nn.ParallelBlock"), message);
            assertTrue(message.contains("Checkpointing.blocks("), "names the fix: " + message);
        }
    }

    @Test
    void theTextAndPropertiesFormsReadWhatTheBuildersMake() {
        assertEquals(
                Checkpointing.every(2),
                AmpOptions.builder().checkpointing("every:2").build().getCheckpointing());
        assertEquals(
                Checkpointing.blocks("class:Linear", "path:02SequentialBlock"),
                AmpOptions.builder()
                        .checkpointing(" class:Linear , path:02SequentialBlock ")
                        .build()
                        .getCheckpointing());
        assertEquals(Checkpointing.stages(), Checkpointing.parse(" Stages "));
        assertEquals(Checkpointing.none(), AmpOptions.builder().build().getCheckpointing());
        Properties properties = new Properties();
        assertEquals(Checkpointing.none(), Checkpointing.fromProperties(properties));
        properties.setProperty("checkpointing", "auto");
        assertEquals(Checkpointing.auto(), Checkpointing.fromProperties(properties));
        for (Checkpointing c :
                new Checkpointing[] {
                    Checkpointing.none(),
                    Checkpointing.stages(),
                    Checkpointing.every(7),
                    Checkpointing.auto(),
                    Checkpointing.blocks("class:ai.djl.nn.core.Linear", "path:01Linear")
                }) {
            Checkpointing back = Checkpointing.parse(c.toString());
            assertEquals(c, back, c.toString());
            assertEquals(c.getMode(), back.getMode());
            assertEquals(c.getStagesPerSegment(), back.getStagesPerSegment());
            assertEquals(c.getSelectors(), back.getSelectors());
        }
    }

    @Test
    void garbageAndEveryZeroAreRefusedNamingTheForms() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> AmpOptions.builder().checkpointing("sqrt"));
        assertTrue(e.getMessage().contains("none, stages, every:N, auto"), e.getMessage());
        e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> Checkpointing.fromProperties(properties("every:two")));
        assertTrue(e.getMessage().contains("every:N needs a whole number"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Checkpointing.every(0));
        assertTrue(e.getMessage().contains("n >= 1"), e.getMessage());
        assertTrue(e.getMessage().contains("Checkpointing.stages()"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Checkpointing.parse("every:0"));
        assertTrue(e.getMessage().contains("got 0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Checkpointing.parse("class:"));
        assertTrue(e.getMessage().contains("class:NAME or path:PATH"), e.getMessage());
    }

    private static Properties properties(String checkpointing) {
        Properties properties = new Properties();
        properties.setProperty(Checkpointing.PROPERTY, checkpointing);
        return properties;
    }
}
