package io.github.djlamp.examples;

import io.github.djlamp.amp.doctor.DoctorReport;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * Draws a report's charts into a folder: {@link ReportCharts#write} in the demo, a stand-in in
 * tests.
 */
@FunctionalInterface
interface ChartWriter {

    /**
     * Draws the charts.
     *
     * @param report the report
     * @param subtitle what was trained, for the titles
     * @param dir the output folder
     * @return the files written
     * @throws IOException if a file cannot be written
     */
    List<Path> write(DoctorReport report, String subtitle, Path dir) throws IOException;
}
