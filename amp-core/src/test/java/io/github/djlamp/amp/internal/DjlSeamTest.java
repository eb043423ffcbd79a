package io.github.djlamp.amp.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDList;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.training.Trainer;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.optimizer.Sgd;
import ai.djl.training.tracker.Tracker;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.internal.DjlSeam.CheckedFields;
import io.github.djlamp.amp.internal.DjlSeam.FieldSpec;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** The seam finds every DJL field it needs on the DJL under test and names what it cannot find. */
class DjlSeamTest {

    /** Set by the build to the DJL version it put on the class path. */
    private static final String EXPECTED_VERSION_PROPERTY = "djlamp.test.djlVersion";

    @Test
    void theDjlOnTheClassPathIsTheOneTheBuildChoseAndATestedOne() {
        String version = DjlSeam.djlVersion();
        System.out.println("djl-amp: these tests run on DJL " + version);
        String expected = System.getProperty(EXPECTED_VERSION_PROPERTY);
        if (expected != null) {
            assertEquals(expected, version);
        }
        assertTrue(
                DjlSeam.TESTED_DJL_VERSIONS.contains(version),
                version + " is not in " + DjlSeam.TESTED_DJL_VERSIONS);
    }

    @Test
    void everyFieldDjlAmpReadsIsThereWithItsType() {
        assertEquals(List.of(), DjlSeam.missingFields());
    }

    @Test
    void aMissingOrRetypedFieldIsNamedWithTheVersionFoundAndThoseTested() {
        CheckedFields fields =
                new CheckedFields(
                        List.of(
                                new FieldSpec(ParallelBlock.class, "joinFunction", Function.class),
                                new FieldSpec(Sgd.class, "momentum", double.class),
                                new FieldSpec(Sgd.class, "momentumStates", java.util.Map.class)));
        assertEquals("momentumStates", fields.field(Sgd.class, "momentumStates").getName());
        AmpException e =
                assertThrows(
                        AmpException.class,
                        () -> fields.field(ParallelBlock.class, "joinFunction"));
        String message = e.getMessage();
        assertTrue(message.contains("ParallelBlock.joinFunction (no such field"), message);
        assertTrue(message.contains("Sgd.momentum (expected double, found float)"), message);
        assertTrue(
                message.contains("DJL " + DjlSeam.djlVersion() + " is on the class path"), message);
        assertTrue(message.contains("tested with DJL 0.35.1 and 0.36.0"), message);
        assertTrue(message.contains("djl-amp-bom"), message);
        assertEquals(2, fields.problems().size());
    }

    @Test
    void aFieldTheSeamDoesNotCheckIsRefused() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () -> DjlSeam.read(Optimizer.sgd(), Sgd.class, "learningRate"));
        assertTrue(e.getMessage().contains("DjlSeam.FIELDS"), e.getMessage());
    }

    @Test
    void optimizerFieldsAreReadAndWritten() {
        Sgd sgd =
                Optimizer.sgd()
                        .setLearningRateTracker(Tracker.fixed(0.1f))
                        .optMomentum(0.9f)
                        .optWeightDecays(0.01f)
                        .build();
        assertEquals(0.9f, (float) DjlSeam.read(sgd, Sgd.class, "momentum"));
        assertEquals(0.01f, (float) DjlSeam.read(sgd, Optimizer.class, "weightDecays"));
        DjlSeam.write(sgd, Optimizer.class, "numUpdate", 7);
        assertEquals(7, (int) DjlSeam.read(sgd, Optimizer.class, "numUpdate"));
    }

    @Test
    void blockFunctionsAreReadAsTheyWereGiven() {
        Function<List<NDList>, NDList> join = list -> list.get(0);
        assertSame(join, DjlSeam.parallelJoin(new ParallelBlock(join)));
        Function<NDList, NDList> lambda = x -> x;
        assertSame(lambda, DjlSeam.lambdaFunction(new LambdaBlock(lambda)));
    }

    @Test
    void saveListenerSettingsAreRead() {
        SaveModelTrainingListener listener = new SaveModelTrainingListener("/tmp/checkpoints");
        assertEquals("/tmp/checkpoints", DjlSeam.saveDirectory(listener));
        assertNull(DjlSeam.saveCallback(listener));
        Consumer<Trainer> callback = trainer -> {};
        listener.setSaveModelCallback(callback);
        assertSame(callback, DjlSeam.saveCallback(listener));
        assertEquals(0, DjlSeam.saveEpochCount(listener));
    }

    @Test
    void testedVersionsReadAsASentence() {
        assertEquals("DJL 0.35.1 and 0.36.0", DjlSeam.testedDjlVersions());
    }
}
