package io.github.djlamp.amp.distributed;

import ai.djl.training.evaluator.Evaluator;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The values of some evaluators under one key, averaged over the ranks at a point every rank
 * reaches (the end of an epoch), and served until the accumulator changes again. Every rank takes
 * an equal share of each global batch, so the mean of the ranks' means is the global mean.
 */
final class RankMeans {

    private final Map<String, Float> synced = new HashMap<>();

    Float get(String key) {
        return synced.get(key);
    }

    void forget(String key) {
        synced.remove(key);
    }

    /**
     * Averages each evaluator's accumulator under {@code key} over the ranks, in one all-reduce;
     * evaluators without that accumulator (the same ones on every rank) are left out.
     */
    static void sync(
            List<? extends Evaluator> evaluators, List<RankMeans> means, String key, World world) {
        float[] values = new float[evaluators.size()];
        boolean[] present = new boolean[evaluators.size()];
        for (int i = 0; i < values.length; i++) {
            means.get(i).forget(key);
            try {
                values[i] = evaluators.get(i).getAccumulator(key);
                present[i] = true;
            } catch (IllegalArgumentException e) {
                present[i] = false; // no accumulator under this key on any rank
            }
        }
        ByteBuffer buffer =
                ByteBuffer.allocateDirect(values.length * Float.BYTES)
                        .order(ByteOrder.nativeOrder());
        for (int i = 0; i < values.length; i++) {
            buffer.putFloat(i * Float.BYTES, present[i] ? values[i] : 0f);
        }
        world.allReduceSum(buffer, values.length, "mean of evaluators under " + key);
        for (int i = 0; i < values.length; i++) {
            if (present[i]) {
                means.get(i).synced.put(key, buffer.getFloat(i * Float.BYTES) / world.getSize());
            }
        }
    }
}
