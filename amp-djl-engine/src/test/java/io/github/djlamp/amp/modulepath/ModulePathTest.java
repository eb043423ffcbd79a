package io.github.djlamp.amp.modulepath;

import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.pytorch.engine.PtEngine;
import com.sun.jna.Native;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.pytorch.PtAmpBackend;
import java.io.File;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.analysis.Analyzer;
import org.slf4j.Logger;

/**
 * amp-core's and amp-djl-engine's module descriptors at work: a JVM with both modules, DJL's api
 * and PyTorch engine, JNA and slf4j on the module path, and the rest of this test's class path
 * (natives, JNI jar, logger) on the class path, trains three mixed_float16 steps. ASM, which
 * amp-core requires, is on the module path too. The backend must come through amp-djl-engine's
 * {@code provides} (a named module's META-INF/services is ignored), and amp-core must export
 * exactly its API packages.
 */
class ModulePathTest {

    @Test
    void aProgramTrainsWithDjlAmpOnTheModulePath() throws Exception {
        Set<Path> modules = new LinkedHashSet<>();
        for (Class<?> type :
                List.of(
                        Amp.class,
                        PtAmpBackend.class,
                        Engine.class,
                        PtEngine.class,
                        Native.class, // JNA: the engine layer reaches libtorch's autocast
                        Logger.class,
                        ClassReader.class,
                        ClassNode.class,
                        Analyzer.class)) {
            modules.add(ModulePathJvm.location(type));
        }
        List<String> classPath = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!modules.contains(Path.of(entry).toAbsolutePath())) {
                classPath.add(entry);
            }
        }
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-Dai.djl.offline=true");
        command.add("--module-path");
        command.add(join(modules));
        command.add("--add-modules");
        command.add(ModulePathProgram.ENGINE);
        command.add("-cp");
        command.add(String.join(File.pathSeparator, classPath));
        command.add(ModulePathProgram.class.getName());

        String output = ModulePathJvm.run(command);

        assertTrue(output.contains("amp-core module: " + ModulePathProgram.CORE), output);
        assertTrue(
                output.contains(
                        "backend: "
                                + PtAmpBackend.class.getName()
                                + " from module "
                                + ModulePathProgram.ENGINE),
                output);
        String core = ModulePathProgram.CORE;
        assertTrue(
                output.contains(
                        "exported: "
                                + String.join(
                                        " ",
                                        core,
                                        core + ".capture",
                                        core + ".cast",
                                        core + ".compile",
                                        core + ".diagnostics",
                                        core + ".exception",
                                        core + ".policy",
                                        core + ".scale",
                                        core + ".spi",
                                        core + ".train",
                                        core + ".verify")
                                + "\n"),
                output);
        assertTrue(output.contains("internal to the engine: true"), output);
        assertTrue(output.contains("steps taken: " + ModulePathProgram.STEPS), output);
        assertTrue(output.contains("Activation::relu: PASS_THROUGH"), output);
    }

    private static String join(Set<Path> paths) {
        List<String> names = new ArrayList<>();
        for (Path path : paths) {
            names.add(path.toString());
        }
        return String.join(File.pathSeparator, names);
    }
}
