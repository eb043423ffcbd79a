package io.github.djlamp.amp.doctor;

/** A probe that measures nothing, for platforms without a way to read memory use. */
final class UnavailableMemoryProbe implements MemoryProbe {

    private final String reason;

    UnavailableMemoryProbe(String reason) {
        this.reason = reason;
    }

    @Override
    public void release() {}

    @Override
    public void stepStarted() {}

    @Override
    public void stepEnded() {}

    @Override
    public long getPeakBytes() {
        return -1;
    }

    @Override
    public long getLastStepGrowthBytes() {
        return -1;
    }

    @Override
    public String describe() {
        return "not measured: " + reason;
    }
}
