package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class SamplesTest {

    @Test
    void quantilesInterpolateLikeNumpy() {
        // numpy.quantile([7, 1, 3, 5], [0.25, 0.5, 0.75]) == [2.5, 4.0, 5.5]
        Samples s = new Samples(7, 1, 3, 5);
        assertEquals(2.5, s.q1(), 1e-12);
        assertEquals(4.0, s.median(), 1e-12);
        assertEquals(5.5, s.q3(), 1e-12);
        assertEquals(1.0, s.quantile(0), 1e-12);
        assertEquals(7.0, s.quantile(1), 1e-12);
    }

    @Test
    void oddCountHasAMiddleElement() {
        assertEquals(3.0, Samples.of(List.of(9, 3, 1)).median(), 1e-12);
    }

    @Test
    void rejectsNoMeasurementsAndBadQuantiles() {
        assertThrows(IllegalArgumentException.class, Samples::new);
        assertThrows(IllegalArgumentException.class, () -> new Samples(1).quantile(1.5));
    }
}
