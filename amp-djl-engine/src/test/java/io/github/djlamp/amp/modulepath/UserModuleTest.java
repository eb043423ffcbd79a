package io.github.djlamp.amp.modulepath;

import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import io.github.djlamp.amp.Amp;
import java.io.File;
import java.io.StringWriter;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.analysis.Analyzer;
import org.slf4j.Logger;

/**
 * A user's model in a named module of its own: djl-amp reads a block's fields to know what its
 * forward reaches, which a module allows only for packages it opens. Without {@code opens} the
 * block ran whole in fp32 and the plan's reason named one of its fields as "a block that is not one
 * of its children", which it is; now the reason names the package and the line that opens it.
 */
class UserModuleTest {

    private static final String MODULE = "user.model";

    @TempDir Path work;

    @Test
    void aBlockInAPackageNotOpenToDjlAmpIsPlannedWithTheLineThatOpensIt() throws Exception {
        String closed = plan(false);
        assertTrue(closed.contains("reason: opaque composite"), "one fp32 unit: " + closed);
        assertTrue(
                closed.contains(
                        "why not read: its package user.model is not open to djl-amp: add 'opens"
                                + " user.model to io.github.djlamp.amp;' to module user.model's"
                                + " module-info.java"),
                closed);

        String open = plan(true);
        assertTrue(open.contains("why not read: null"), open);
        assertTrue(
                open.contains("reason: a block whose forward djl-amp read"),
                "a 16-bit unit: " + open);
    }

    /**
     * Compiles the user's module, opened to djl-amp or not, runs it and returns what it printed.
     */
    private String plan(boolean opens) throws Exception {
        Path sources = work.resolve(opens ? "open-src" : "closed-src");
        Path classes = work.resolve(opens ? "open" : "closed");
        Path pkg = sources.resolve("user/model");
        Files.createDirectories(pkg);
        Files.writeString(
                sources.resolve("module-info.java"),
                "module "
                        + MODULE
                        + " {\n"
                        + "    requires io.github.djlamp.amp;\n"
                        + "    requires ai.djl.api;\n"
                        + "    exports user.model;\n"
                        + (opens ? "    opens user.model to io.github.djlamp.amp;\n" : "")
                        + "}\n");
        Files.writeString(
                pkg.resolve("Residual.java"),
                "package user.model;\n"
                        + "import ai.djl.ndarray.NDList;\n"
                        + "import ai.djl.nn.AbstractBlock;\n"
                        + "import ai.djl.nn.core.Linear;\n"
                        + "import ai.djl.training.ParameterStore;\n"
                        + "import ai.djl.util.PairList;\n"
                        + "public final class Residual extends AbstractBlock {\n"
                        + "    private final Linear inner;\n"
                        + "    public Residual(int units) {\n"
                        + "        inner = addChildBlock(\"inner\","
                        + " Linear.builder().setUnits(units).build());\n"
                        + "    }\n"
                        + "    @Override\n"
                        + "    protected NDList forwardInternal(ParameterStore store, NDList x,"
                        + " boolean training, PairList<String, Object> params) {\n"
                        + "        return new NDList(inner.forward(store, x, training).head()"
                        + ".add(x.head()));\n"
                        + "    }\n"
                        + "    @Override\n"
                        + "    public ai.djl.ndarray.types.Shape[] getOutputShapes("
                        + "ai.djl.ndarray.types.Shape[] inputs) {\n"
                        + "        return inputs;\n"
                        + "    }\n"
                        + "}\n");
        Files.writeString(
                pkg.resolve("Main.java"),
                "package user.model;\n"
                        + "import io.github.djlamp.amp.policy.BlockPlan;\n"
                        + "import io.github.djlamp.amp.policy.DefaultCastRules;\n"
                        + "import io.github.djlamp.amp.policy.ModelPlan;\n"
                        + "import io.github.djlamp.amp.policy.PrecisionPolicy;\n"
                        + "public final class Main {\n"
                        + "    public static void main(String[] args) {\n"
                        + "        BlockPlan root = ModelPlan.of(PrecisionPolicy.mixedBfloat16(),"
                        + " new Residual(4), b -> false).get(\"\");\n"
                        + "        System.out.println(\"strategy: \" + root.getStrategy());\n"
                        + "        System.out.println(\"reason: \" + root.getReason());\n"
                        + "        System.out.println(\"why not read: \""
                        + " + DefaultCastRules.whyNotRead(root.getBlock()));\n"
                        + "    }\n"
                        + "}\n");
        String modulePath = modulePath();
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        StringWriter diagnostics = new StringWriter();
        List<String> options =
                List.of("--module-path", modulePath, "-d", classes.toString(), "-nowarn");
        List<File> files =
                List.of(
                        sources.resolve("module-info.java").toFile(),
                        pkg.resolve("Residual.java").toFile(),
                        pkg.resolve("Main.java").toFile());
        var fileManager = javac.getStandardFileManager(null, null, StandardCharsets.UTF_8);
        boolean compiled =
                javac.getTask(
                                diagnostics,
                                fileManager,
                                null,
                                options,
                                null,
                                fileManager.getJavaFileObjectsFromFiles(files))
                        .call();
        assertTrue(compiled, diagnostics.toString());

        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx256m");
        command.add("--module-path");
        command.add(modulePath + File.pathSeparator + classes);
        command.add("-cp");
        command.add(classPathBesides(modulePath));
        command.add("-m");
        command.add(MODULE + "/user.model.Main");
        return ModulePathJvm.run(command);
    }

    /** djl-amp's core, DJL's api, ASM and slf4j: what the user's module and djl-amp require. */
    private static String modulePath() throws URISyntaxException {
        Set<String> modules = new LinkedHashSet<>();
        for (Class<?> type :
                List.of(
                        Amp.class,
                        Engine.class,
                        Logger.class,
                        ClassReader.class,
                        ClassNode.class,
                        Analyzer.class)) {
            modules.add(ModulePathJvm.location(type).toString());
        }
        return String.join(File.pathSeparator, modules);
    }

    private static String classPathBesides(String modulePath) {
        Set<String> modules = Set.of(modulePath.split(File.pathSeparator));
        List<String> rest = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!modules.contains(Path.of(entry).toAbsolutePath().toString())) {
                rest.add(entry);
            }
        }
        return String.join(File.pathSeparator, rest);
    }
}
