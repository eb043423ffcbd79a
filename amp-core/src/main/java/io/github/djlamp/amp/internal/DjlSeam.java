package io.github.djlamp.amp.internal;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.LambdaBlock;
import ai.djl.nn.ParallelBlock;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.norm.Dropout;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.nn.recurrent.RecurrentBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.training.Trainer;
import ai.djl.training.listener.SaveModelTrainingListener;
import ai.djl.training.optimizer.Adam;
import ai.djl.training.optimizer.AdamW;
import ai.djl.training.optimizer.Nag;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.optimizer.Sgd;
import ai.djl.training.tracker.ParameterTracker;
import io.github.djlamp.amp.exception.AmpException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Every place djl-amp reaches past DJL's public API: private fields of DJL classes that offer no
 * getter, and the DJL versions djl-amp was tested with. Not part of djl-amp's API.
 *
 * <p>At first use, every field in {@code FIELDS} is looked up once and its type checked. A field
 * that another DJL version renamed, removed or retyped makes each accessor that needs it throw an
 * {@link AmpException} naming every such field, the DJL version found at run time and {@link
 * #TESTED_DJL_VERSIONS}; the fields that were found keep working.
 */
public final class DjlSeam {

    /** The DJL versions djl-amp is built and tested with, oldest first. */
    public static final List<String> TESTED_DJL_VERSIONS = List.of("0.35.1", "0.36.0");

    /** The PyTorch version of the natives djl-amp is tested with, under every tested DJL. */
    public static final String TESTED_PYTORCH_VERSION = "2.7.1";

    /** The private fields djl-amp reads or writes, with the types it expects them to have. */
    static final List<FieldSpec> FIELDS =
            List.of(
                    new FieldSpec(ParallelBlock.class, "function", Function.class),
                    new FieldSpec(LambdaBlock.class, "lambda", Function.class),
                    new FieldSpec(Dropout.class, "rate", float.class),
                    new FieldSpec(RecurrentBlock.class, "dropRate", float.class),
                    new FieldSpec(RecurrentBlock.class, "numLayers", int.class),
                    new FieldSpec(BatchNorm.class, "axis", int.class),
                    new FieldSpec(BatchNorm.class, "epsilon", float.class),
                    new FieldSpec(BatchNorm.class, "momentum", float.class),
                    new FieldSpec(LayerNorm.class, "normalizedShape", Shape.class),
                    new FieldSpec(LayerNorm.class, "epsilon", float.class),
                    new FieldSpec(ScaledDotProductAttentionBlock.class, "embeddingSize", int.class),
                    new FieldSpec(ScaledDotProductAttentionBlock.class, "headCount", int.class),
                    new FieldSpec(
                            TransformerEncoderBlock.class, "selfAttentionDropout", Dropout.class),
                    new FieldSpec(
                            TransformerEncoderBlock.class, "fullyConnectedDropout", Dropout.class),
                    new FieldSpec(Trainer.class, "gradientsChecked", boolean.class),
                    new FieldSpec(Trainer.class, "parameterStore", ParameterStore.class),
                    new FieldSpec(SaveModelTrainingListener.class, "outputDir", String.class),
                    new FieldSpec(SaveModelTrainingListener.class, "onSaveModel", Consumer.class),
                    new FieldSpec(SaveModelTrainingListener.class, "epoch", int.class),
                    new FieldSpec(Optimizer.class, "rescaleGrad", float.class),
                    new FieldSpec(Optimizer.class, "clipGrad", float.class),
                    new FieldSpec(Optimizer.class, "weightDecays", float.class),
                    new FieldSpec(Optimizer.class, "beginNumUpdate", int.class),
                    new FieldSpec(Optimizer.class, "numUpdate", int.class),
                    new FieldSpec(Optimizer.class, "updateCounts", Map.class),
                    new FieldSpec(Sgd.class, "learningRateTracker", ParameterTracker.class),
                    new FieldSpec(Sgd.class, "momentum", float.class),
                    new FieldSpec(Sgd.class, "momentumStates", Map.class),
                    new FieldSpec(Nag.class, "learningRateTracker", ParameterTracker.class),
                    new FieldSpec(Nag.class, "momentum", float.class),
                    new FieldSpec(Nag.class, "momentumStates", Map.class),
                    new FieldSpec(Adam.class, "learningRateTracker", ParameterTracker.class),
                    new FieldSpec(Adam.class, "beta1", float.class),
                    new FieldSpec(Adam.class, "beta2", float.class),
                    new FieldSpec(Adam.class, "epsilon", float.class),
                    new FieldSpec(Adam.class, "means", Map.class),
                    new FieldSpec(Adam.class, "variances", Map.class),
                    new FieldSpec(AdamW.class, "learningRateTracker", ParameterTracker.class),
                    new FieldSpec(AdamW.class, "beta1", float.class),
                    new FieldSpec(AdamW.class, "beta2", float.class),
                    new FieldSpec(AdamW.class, "epsilon", float.class),
                    new FieldSpec(AdamW.class, "means", Map.class),
                    new FieldSpec(AdamW.class, "variances", Map.class));

    private DjlSeam() {}

    /**
     * Returns the join function of a ParallelBlock, which DJL keeps in a private field.
     *
     * @param block the block
     * @return the function that joins its branches' outputs
     * @throws AmpException if this DJL version has no such field
     */
    @SuppressWarnings("unchecked")
    public static Function<List<NDList>, NDList> parallelJoin(ParallelBlock block) {
        return (Function<List<NDList>, NDList>) read(block, ParallelBlock.class, "function");
    }

    /**
     * Returns the function a LambdaBlock runs, which DJL keeps in a private field.
     *
     * @param block the block
     * @return its function
     * @throws AmpException if this DJL version has no such field
     */
    @SuppressWarnings("unchecked")
    public static Function<NDList, NDList> lambdaFunction(LambdaBlock block) {
        return (Function<NDList, NDList>) read(block, LambdaBlock.class, "lambda");
    }

    /**
     * Returns a BatchNorm's axis, epsilon and momentum (DJL's convention: the share the running
     * statistics keep), which DJL keeps in private fields.
     *
     * @param block the block
     * @return {axis, epsilon, momentum}
     * @throws AmpException if this DJL version has no such fields
     */
    public static float[] batchNormSettings(BatchNorm block) {
        return new float[] {
            (int) read(block, BatchNorm.class, "axis"),
            (float) read(block, BatchNorm.class, "epsilon"),
            (float) read(block, BatchNorm.class, "momentum")
        };
    }

    /**
     * Turns off the check DJL's Trainer makes at its first {@code step()} (a private flag), for a
     * caller that makes it instead.
     *
     * @param trainer the trainer
     * @throws AmpException if this DJL version has no such field
     */
    public static void skipFirstGradientCheck(Trainer trainer) {
        write(trainer, Trainer.class, "gradientsChecked", true);
    }

    /**
     * Returns a trainer's own parameter store, which DJL keeps in a private field: the store its
     * {@code step()} updates the parameters of.
     *
     * @param trainer the trainer
     * @return its store
     * @throws AmpException if this DJL version has no such field
     */
    public static ParameterStore parameterStore(Trainer trainer) {
        return (ParameterStore) read(trainer, Trainer.class, "parameterStore");
    }

    /**
     * Returns a Dropout's rate, which DJL keeps in a private field.
     *
     * @param block the block
     * @return the probability of dropping a value
     * @throws AmpException if this DJL version has no such field
     */
    public static float dropoutRate(Dropout block) {
        return (float) read(block, Dropout.class, "rate");
    }

    /**
     * Returns the embedding size and head count of an attention block, which DJL keeps in private
     * fields.
     *
     * @param block the block
     * @return {embedding size, head count}
     * @throws AmpException if this DJL version has no such fields
     */
    public static int[] attentionDimensions(ScaledDotProductAttentionBlock block) {
        return new int[] {
            (int) read(block, ScaledDotProductAttentionBlock.class, "embeddingSize"),
            (int) read(block, ScaledDotProductAttentionBlock.class, "headCount")
        };
    }

    /**
     * Returns the two dropouts of a transformer encoder block, which DJL keeps in private fields
     * and not among its children.
     *
     * @param block the block
     * @return {the dropout after attention, the dropout after the feed-forward layers}
     * @throws AmpException if this DJL version has no such fields
     */
    public static Dropout[] encoderDropouts(TransformerEncoderBlock block) {
        return new Dropout[] {
            (Dropout) read(block, TransformerEncoderBlock.class, "selfAttentionDropout"),
            (Dropout) read(block, TransformerEncoderBlock.class, "fullyConnectedDropout")
        };
    }

    /**
     * Returns the directory a SaveModelTrainingListener saves to (DJL offers no getter).
     *
     * @param listener the listener
     * @return its output directory
     * @throws AmpException if this DJL version has no such field
     */
    public static String saveDirectory(SaveModelTrainingListener listener) {
        return (String) read(listener, SaveModelTrainingListener.class, "outputDir");
    }

    /**
     * Returns the callback a SaveModelTrainingListener runs before each save (DJL offers no
     * getter).
     *
     * @param listener the listener
     * @return its callback, or null when none was set
     * @throws AmpException if this DJL version has no such field
     */
    @SuppressWarnings("unchecked")
    public static Consumer<Trainer> saveCallback(SaveModelTrainingListener listener) {
        return (Consumer<Trainer>) read(listener, SaveModelTrainingListener.class, "onSaveModel");
    }

    /**
     * Returns how many epochs a SaveModelTrainingListener has counted (DJL offers no getter).
     *
     * @param listener the listener
     * @return its epoch count
     * @throws AmpException if this DJL version has no such field
     */
    public static int saveEpochCount(SaveModelTrainingListener listener) {
        return (int) read(listener, SaveModelTrainingListener.class, "epoch");
    }

    /**
     * Reads one of {@code FIELDS}: a private field that {@code owner} declares.
     *
     * @param target the object to read from, an instance of {@code owner}
     * @param owner the DJL class that declares the field
     * @param name the field's name
     * @return the field's value, boxed for a primitive
     * @throws AmpException if this DJL version has no such field, or one of another type
     * @throws IllegalArgumentException if the field is not one of {@code FIELDS}
     */
    public static Object read(Object target, Class<?> owner, String name) {
        try {
            return CheckedFields.INSTANCE.field(owner, name).get(target);
        } catch (IllegalAccessException e) {
            throw new AssertionError("setAccessible succeeded for " + name, e);
        }
    }

    /**
     * Writes one of {@code FIELDS}: a private field that {@code owner} declares.
     *
     * @param target the object to write to, an instance of {@code owner}
     * @param owner the DJL class that declares the field
     * @param name the field's name
     * @param value the new value, boxed for a primitive
     * @throws AmpException if this DJL version has no such field, or one of another type
     * @throws IllegalArgumentException if the field is not one of {@code FIELDS}
     */
    public static void write(Object target, Class<?> owner, String name, Object value) {
        try {
            CheckedFields.INSTANCE.field(owner, name).set(target, value);
        } catch (IllegalAccessException e) {
            throw new AssertionError("setAccessible succeeded for " + name, e);
        }
    }

    /**
     * Returns the fields of {@code FIELDS} that this DJL version lacks or types otherwise, each
     * with what was expected and found; empty on a tested version. Checks at first use only.
     *
     * @return one line a field, empty when all are as expected
     */
    public static List<String> missingFields() {
        return CheckedFields.INSTANCE.problems();
    }

    /**
     * Returns the version of DJL's api jar on the class path, the one {@code
     * Engine.getDjlVersion()} reports, read without loading an engine.
     *
     * @return the version, or "unknown" when the jar carries none
     */
    public static String djlVersion() {
        // Engine.getDjlVersion() would initialize Engine, which looks up every engine and may
        // call DJL's telemetry: a version in an error message must not cost either.
        String version = Engine.class.getPackage().getSpecificationVersion();
        if (version != null) {
            return version;
        }
        try (InputStream in = Engine.class.getResourceAsStream("api.properties")) {
            if (in != null) {
                Properties properties = new Properties();
                properties.load(in);
                return properties.getProperty("djl_version", "unknown");
            }
        } catch (IOException e) {
            // no version to report: fall through
        }
        return "unknown";
    }

    /**
     * Returns the tested DJL versions as a sentence fragment, such as "DJL 0.35.1 and 0.36.0".
     *
     * @return the versions, for a message
     */
    public static String testedDjlVersions() {
        List<String> versions = TESTED_DJL_VERSIONS;
        int last = versions.size() - 1;
        return "DJL "
                + (last == 0
                        ? versions.get(0)
                        : String.join(", ", versions.subList(0, last))
                                + " and "
                                + versions.get(last));
    }

    /**
     * Returns what a message about a DJL mismatch says of the versions: the one found at run time
     * and those djl-amp was tested with.
     *
     * @return for example "DJL 0.37.0 is on the class path; djl-amp was tested with DJL 0.35.1 and
     *     0.36.0"
     */
    public static String versionReport() {
        return "DJL "
                + djlVersion()
                + " is on the class path; djl-amp was tested with "
                + testedDjlVersions();
    }

    /** A private field djl-amp needs: the class that declares it, its name and its type. */
    record FieldSpec(Class<?> owner, String name, Class<?> type) {
        @Override
        public String toString() {
            return owner.getSimpleName() + "." + name;
        }
    }

    /** The outcome of looking up every field once: those found, and one line for each not. */
    static final class CheckedFields {
        static final CheckedFields INSTANCE = new CheckedFields(FIELDS);

        private final Map<Class<?>, Map<String, Field>> found = new HashMap<>();
        private final Map<Class<?>, Map<String, FieldSpec>> specs = new HashMap<>();
        private final List<String> problems = new ArrayList<>();

        CheckedFields(List<FieldSpec> fields) {
            for (FieldSpec spec : fields) {
                specs.computeIfAbsent(spec.owner(), c -> new HashMap<>()).put(spec.name(), spec);
                String problem = lookUp(spec);
                if (problem != null) {
                    problems.add(spec + " (" + problem + ")");
                }
            }
        }

        List<String> problems() {
            return Collections.unmodifiableList(problems);
        }

        /** Looks up one field; returns what is wrong with it, or null when it is as expected. */
        private String lookUp(FieldSpec spec) {
            Field field;
            try {
                field = spec.owner().getDeclaredField(spec.name());
            } catch (NoSuchFieldException e) {
                return "no such field; expected " + spec.type().getName();
            }
            if (field.getType() != spec.type()) {
                return "expected " + spec.type().getName() + ", found " + field.getType().getName();
            }
            try {
                field.setAccessible(true);
            } catch (RuntimeException e) {
                return "not accessible: " + e.getMessage();
            }
            found.computeIfAbsent(spec.owner(), c -> new HashMap<>()).put(spec.name(), field);
            return null;
        }

        /** Returns a checked field; throws naming every field not as expected if it is one. */
        Field field(Class<?> owner, String name) {
            Map<String, Field> fields = found.get(owner);
            Field field = fields == null ? null : fields.get(name);
            if (field != null) {
                return field;
            }
            Map<String, FieldSpec> declared = specs.get(owner);
            if (declared == null || !declared.containsKey(name)) {
                throw new IllegalArgumentException(
                        owner.getSimpleName()
                                + "."
                                + name
                                + " is not one of the fields DjlSeam checks: add it to"
                                + " DjlSeam.FIELDS");
            }
            throw new AmpException(
                    "djl-amp reads private fields of DJL that this DJL version does not have as"
                            + " expected: "
                            + String.join(", ", problems)
                            + ". "
                            + versionReport()
                            + ": depend on one of those, or import djl-amp's BOM"
                            + " (io.github.djlamp:djl-amp-bom), which pins DJL's version.");
        }
    }
}
