package io.github.djlamp.bench.train;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The step times of every variant of one network over the rounds of one benchmark run (each round
 * one DJL JVM and one PyTorch process), pooled per variant: the medians the ratios come from.
 */
public final class ThroughputRuns {

    private final int batch;
    private final Map<String, List<Double>> pooled = new LinkedHashMap<>();
    private final Map<String, String> labels = new LinkedHashMap<>();
    private final Map<String, String> frameworks = new LinkedHashMap<>();
    private final Map<Integer, Map<String, Samples>> rounds = new LinkedHashMap<>();

    /**
     * Creates an empty set of runs of one batch size.
     *
     * @param batch the batch size of every run
     */
    public ThroughputRuns(int batch) {
        this.batch = batch;
    }

    /**
     * Adds one process's result file (written by {@code throughput} or {@code pytorch_resnet.py}).
     *
     * @param round the round it belongs to
     * @param run the parsed JSON
     * @throws IllegalArgumentException when its batch size differs from the others
     */
    public void add(int round, JsonObject run) {
        int runBatch = run.get("batch").getAsInt();
        if (runBatch != batch) {
            throw new IllegalArgumentException(
                    "Runs of batch " + runBatch + " and " + batch + " cannot be pooled");
        }
        String framework = run.get("framework").getAsString();
        for (JsonElement e : run.getAsJsonArray("variants")) {
            JsonObject v = e.getAsJsonObject();
            String key = v.get("key").getAsString();
            List<Double> times = new ArrayList<>();
            for (JsonElement t : v.getAsJsonArray("stepMs")) {
                times.add(t.getAsDouble());
            }
            pooled.computeIfAbsent(key, k -> new ArrayList<>()).addAll(times);
            labels.put(key, v.get("label").getAsString());
            frameworks.put(key, framework);
            rounds.computeIfAbsent(round, r -> new LinkedHashMap<>()).put(key, Samples.of(times));
        }
    }

    /**
     * Returns the batch size.
     *
     * @return images per step
     */
    public int getBatch() {
        return batch;
    }

    /**
     * Returns the variant keys in the order first seen.
     *
     * @return the keys
     */
    public List<String> keys() {
        return new ArrayList<>(pooled.keySet());
    }

    /**
     * Returns whether a variant was measured.
     *
     * @param key the variant key
     * @return true when there are step times for it
     */
    public boolean has(String key) {
        return pooled.containsKey(key);
    }

    /**
     * Returns a variant's label.
     *
     * @param key the variant key
     * @return its description
     */
    public String label(String key) {
        return labels.get(key);
    }

    /**
     * Returns the framework that ran a variant.
     *
     * @param key the variant key
     * @return "DJL" or "PyTorch"
     */
    public String framework(String key) {
        return frameworks.get(key);
    }

    /**
     * Returns a variant's step times in milliseconds, pooled over every round.
     *
     * @param key the variant key
     * @return the statistics
     */
    public Samples stepMs(String key) {
        List<Double> times = pooled.get(key);
        if (times == null) {
            throw new IllegalArgumentException("No step times of '" + key + "'");
        }
        return Samples.of(times);
    }

    /**
     * Returns the throughput of a variant's median step.
     *
     * @param key the variant key
     * @return images per second
     */
    public double imagesPerSecond(String key) {
        return batch * 1000.0 / stepMs(key).median();
    }

    /**
     * Returns how many times faster one variant trains than another, from the pooled medians.
     *
     * @param faster the variant in the numerator of the throughput ratio
     * @param baseline the variant in its denominator
     * @return median step time of {@code baseline} over that of {@code faster}
     */
    public double speedup(String faster, String baseline) {
        return stepMs(baseline).median() / stepMs(faster).median();
    }

    /**
     * Returns the speedup measured within each round that has both variants.
     *
     * @param faster the variant in the numerator of the throughput ratio
     * @param baseline the variant in its denominator
     * @return one ratio of medians per round
     */
    public List<Double> speedupPerRound(String faster, String baseline) {
        List<Double> result = new ArrayList<>();
        for (Map<String, Samples> round : rounds.values()) {
            if (round.containsKey(faster) && round.containsKey(baseline)) {
                result.add(round.get(baseline).median() / round.get(faster).median());
            }
        }
        return result;
    }
}
