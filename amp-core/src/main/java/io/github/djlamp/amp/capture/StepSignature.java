package io.github.djlamp.amp.capture;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import java.util.ArrayList;
import java.util.List;

/**
 * The shapes, types and devices of a step's data and labels: a graph replays only batches of the
 * signature it was captured with.
 */
record StepSignature(List<Entry> data, List<Entry> labels) {

    /** One array's shape, type and device. */
    record Entry(Shape shape, DataType type, Device device) {
        @Override
        public String toString() {
            return shape + " " + type + " on " + device;
        }
    }

    static StepSignature of(NDList data, NDList labels) {
        return new StepSignature(entries(data), entries(labels));
    }

    private static List<Entry> entries(NDList arrays) {
        List<Entry> entries = new ArrayList<>(arrays.size());
        for (NDArray array : arrays) {
            entries.add(new Entry(array.getShape(), array.getDataType(), array.getDevice()));
        }
        return List.copyOf(entries);
    }

    /** Whether a batch has this signature, read without building its own. */
    boolean matches(NDList batchData, NDList batchLabels) {
        return matches(data, batchData) && matches(labels, batchLabels);
    }

    private static boolean matches(List<Entry> entries, NDList arrays) {
        if (entries.size() != arrays.size()) {
            return false;
        }
        for (int i = 0; i < entries.size(); i++) {
            Entry entry = entries.get(i);
            NDArray array = arrays.get(i);
            if (entry.type() != array.getDataType()
                    || !entry.shape().equals(array.getShape())
                    || !entry.device().equals(array.getDevice())) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String toString() {
        return "data " + data + ", labels " + labels;
    }
}
