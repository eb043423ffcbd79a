package io.github.djlamp.amp.distributed;

import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import ai.djl.nn.Parameter;
import ai.djl.util.Pair;
import io.github.djlamp.amp.exception.AmpException;
import io.github.djlamp.amp.train.AmpSession;
import java.util.ArrayList;
import java.util.List;

/**
 * What every rank must share before data-parallel training can mean anything: the same parameters
 * (names; each one's shape when rank 0's value is broadcast), the same precision policy and the
 * same loss scaling. Compared once when the trainer is created, so that a mismatch is named on
 * every rank instead of surfacing as a raw MPI error, a hang until the deadline, or a NaN loss
 * steps later.
 */
final class SameSetup {

    private SameSetup() {}

    /**
     * Throws on every rank when any rank's setup differs from rank 0's, naming the ranks and the
     * first difference this rank sees.
     */
    static void require(AmpSession session, Block block, World world) {
        if (world.getSize() == 1) {
            return;
        }
        List<String> mine = describe(session, block);
        String rootText = world.broadcast(String.join("\n", mine), "the ranks' setup");
        List<String> root = List.of(rootText.split("\n", -1));
        String difference = firstDifference(root, mine);
        long[] flags = new long[world.getSize()];
        flags[world.getRank()] = difference == null ? 0 : 1;
        long[] differing = world.allReduceMax(flags, "the ranks' setup");
        List<Integer> ranks = new ArrayList<>();
        for (int r = 0; r < differing.length; r++) {
            if (differing[r] != 0) {
                ranks.add(r);
            }
        }
        if (ranks.isEmpty()) {
            return;
        }
        throw new AmpException(
                "The ranks do not train the same setup: "
                        + (ranks.size() == 1
                                ? "rank " + ranks.get(0) + " differs"
                                : "ranks " + ranks + " differ")
                        + " from rank 0"
                        + (difference == null
                                ? ""
                                : " (rank " + world.getRank() + ": " + difference + ")")
                        + ". Data-parallel training needs the same model, precision policy and loss"
                        + " scaling on every rank: start every rank with the same program and"
                        + " configuration.");
    }

    /**
     * Throws on every rank when a parameter's shape at initialization differs between ranks (the
     * names matched at the trainer's creation; the shapes are known only now).
     */
    static void requireSameShape(Shape shape, World world, String name) {
        long size = shape.size();
        long[] extremes = world.allReduceMax(new long[] {size, -size}, "the shape of " + name);
        if (extremes[0] != size || -extremes[1] != size) {
            throw new AmpException(
                    "The ranks' parameter '"
                            + name
                            + "' differs in size: "
                            + shape
                            + " ("
                            + size
                            + " values) on rank "
                            + world.getRank()
                            + ", between "
                            + -extremes[1]
                            + " and "
                            + extremes[0]
                            + " values across the ranks. Data-parallel training needs the same"
                            + " model on every rank: build it with the same layer sizes.");
        }
    }

    private static List<String> describe(AmpSession session, Block block) {
        List<String> lines = new ArrayList<>();
        lines.add("precision policy " + session.getPolicy());
        lines.add("loss scaling " + session.getScaler().getConfig());
        // names only: a resume may have loaded the parameters on rank 0 alone, so their shapes
        // are compared one by one as rank 0's values are broadcast
        for (Pair<String, Parameter> pair : block.getParameters()) {
            lines.add("parameter " + pair.getKey());
        }
        return lines;
    }

    private static String firstDifference(List<String> root, List<String> mine) {
        for (int i = 0; i < Math.max(root.size(), mine.size()); i++) {
            String theirs = i < root.size() ? root.get(i) : "nothing";
            String ours = i < mine.size() ? mine.get(i) : "nothing";
            if (!theirs.equals(ours)) {
                return "rank 0 has " + theirs + " where this rank has " + ours;
            }
        }
        return null;
    }
}
