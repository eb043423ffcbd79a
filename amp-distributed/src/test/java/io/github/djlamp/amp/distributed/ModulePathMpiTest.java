package io.github.djlamp.amp.distributed;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.Engine;
import ai.djl.pytorch.engine.PtEngine;
import com.sun.jna.Native;
import io.github.djlamp.amp.Amp;
import io.github.djlamp.amp.distributed.modulepath.ModulePathJob;
import io.github.djlamp.amp.pytorch.PtAmpBackend;
import java.io.File;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.tree.ClassNode;
import org.objectweb.asm.tree.analysis.Analyzer;
import org.slf4j.Logger;

/**
 * amp-distributed's module descriptor at work: two ranks under {@code mpirun} with djl-amp's three
 * modules, DJL's api and PyTorch engine, JNA, ASM and slf4j on the module path train the same
 * data-parallel steps (JNA reaches Open MPI from a named module).
 */
class ModulePathMpiTest {

    @Test
    void twoRanksTrainTogetherWithDjlAmpOnTheModulePath() throws Exception {
        Set<String> modules = new LinkedHashSet<>();
        for (Class<?> type :
                List.of(
                        Amp.class,
                        PtAmpBackend.class,
                        World.class,
                        Engine.class,
                        PtEngine.class,
                        Native.class,
                        Logger.class,
                        ClassReader.class, // ASM, which amp-core requires
                        ClassNode.class,
                        Analyzer.class)) {
            modules.add(
                    Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI())
                            .toString());
        }
        // the launcher puts this JVM's class path after these options: a package of a module on
        // the module path is loaded from the module, its copy on the class path is not read
        List<String> options = new ArrayList<>();
        options.add("--module-path");
        options.add(String.join(File.pathSeparator, modules));
        options.add("--add-modules");
        options.add("io.github.djlamp.amp.distributed,io.github.djlamp.amp.pytorch");

        MpiLauncher.Outcome run = MpiLauncher.run(ModulePathJob.class, 2, 180, options);

        assertEquals(0, run.exitCode, run.output);
        Matcher line =
                Pattern.compile(
                                "rank (\\d) of 2: World from module io.github.djlamp.amp.distributed,"
                                        + " steps (\\d+), weights (\\w+)")
                        .matcher(run.output);
        List<String> weights = new ArrayList<>();
        while (line.find()) {
            assertEquals(Integer.toString(ModulePathJob.STEPS), line.group(2), run.output);
            weights.add(line.group(3));
        }
        assertEquals(2, weights.size(), run.output);
        assertTrue(weights.get(0).equals(weights.get(1)), "ranks disagree: " + run.output);
    }
}
