package io.github.djlamp.amp.cast;

import ai.djl.nn.Block;
import ai.djl.util.Pair;
import io.github.djlamp.amp.policy.BlockPaths;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerdicts;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The kernel checks' verdicts that concern one model: those of its precisions whose paths include
 * one of its layers or a unit of one (its attention products). Verdicts are kept per process and
 * shared by every model whose layers have the same signature.
 */
final class ModelKernelVerdicts {

    private ModelKernelVerdicts() {}

    /** Returns the verdicts in {@code precisions} naming a block of {@code root}, in order. */
    static List<KernelVerdict> of(Block root, Set<Precision> precisions) {
        Set<String> paths = new HashSet<>();
        collectPaths(root, "", paths);
        List<KernelVerdict> mine = new ArrayList<>();
        for (KernelVerdict verdict : KernelVerdicts.all()) {
            if (!precisions.contains(verdict.getPrecision())) {
                continue; // another model's, of the same layer names, in another precision
            }
            for (String path : verdict.getPaths()) {
                if (paths.contains(path) || paths.contains(blockOf(path))) {
                    mine.add(verdict);
                    break;
                }
            }
        }
        return mine;
    }

    /**
     * The block of a unit that is part of one, as the summary names it: {@code "a/b (attention
     * products)"} is block {@code "a/b"}'s, {@code "(attention products)"} the root's.
     */
    private static String blockOf(String unit) {
        int part = unit.lastIndexOf('(');
        if (part < 0 || !unit.endsWith(")")) {
            return unit;
        }
        return part == 0 ? "root" : unit.substring(0, part).stripTrailing();
    }

    private static void collectPaths(Block block, String path, Set<String> paths) {
        paths.add(path.isEmpty() ? "root" : path);
        for (Pair<String, Block> child : block.getChildren()) {
            collectPaths(child.getValue(), BlockPaths.child(path, child.getKey()), paths);
        }
    }
}
