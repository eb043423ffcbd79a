package io.github.djlamp.bench.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class ReportSectionTest {

    @Test
    void replacesOnlyTheGeneratedSection() {
        String doc =
                "# Title\n\n"
                        + ReportCommand.BEGIN
                        + "\nold tables\n"
                        + ReportCommand.END
                        + "\n\n## Findings\nwritten by hand\n";
        String updated = ReportCommand.replaceSection(doc, "new tables\n");
        assertEquals(
                "# Title\n\n"
                        + ReportCommand.BEGIN
                        + "\nnew tables\n"
                        + ReportCommand.END
                        + "\n\n## Findings\nwritten by hand\n",
                updated);
        assertEquals(updated, ReportCommand.replaceSection(updated, "new tables\n"));
    }

    @Test
    void refusesAFileWithoutMarkers() {
        assertThrows(
                IllegalArgumentException.class,
                () -> ReportCommand.replaceSection("# no markers\n", "x"));
        assertThrows(
                IllegalArgumentException.class,
                () ->
                        ReportCommand.replaceSection(
                                ReportCommand.END + "\n" + ReportCommand.BEGIN + "\n", "x"));
    }
}
