package io.github.djlamp.amp.cast;

/** How far a 16-bit result lies from its fp32 reference, for the tests that compare them. */
final class Fp32Distance {

    private Fp32Distance() {}

    /**
     * Returns ||actual - expected|| / max(||expected||, 1): relative for large arrays, absolute for
     * small ones (a convolution's bias before BatchNorm has a gradient of about 1e-6).
     */
    static double of(float[] expected, float[] actual) {
        double difference = 0;
        double norm = 0;
        for (int i = 0; i < expected.length; i++) {
            difference += Math.pow(actual[i] - expected[i], 2);
            norm += Math.pow(expected[i], 2);
        }
        return Math.sqrt(difference) / Math.max(Math.sqrt(norm), 1);
    }
}
