package io.github.djlamp.amp.diagnostics;

import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Writes an {@link AlignmentReport} as a text table or as CSV. */
final class AlignmentTable {

    private static final String MARK = "*";
    private static final String[] HEADER = {
        "path", "layer", "M", "N", "K", "in", "out", "groups", "FLOPs", "aligned", "suggestion"
    };

    /** Columns written right-aligned: the numbers. */
    private static final boolean[] NUMERIC = {
        false, false, true, true, true, true, true, true, true, false, false
    };

    private static final int GROUPS_COLUMN = 7;

    private AlignmentTable() {}

    static String table(AlignmentReport report) {
        StringBuilder out = new StringBuilder();
        out.append("Tensor Core alignment (multiples of ")
                .append(AlignmentReport.MULTIPLE)
                .append(") under ")
                .append(report.getPolicy())
                .append(" for input ")
                .append(LayerNames.shapes(report.getInputShapes()))
                .append('\n');
        if (report.getEntries().isEmpty()) {
            return out.append(report.getSummary()).append('\n').toString();
        }
        boolean grouped = report.getEntries().stream().anyMatch(e -> e.getGroups() > 1);
        List<String[]> rows = new ArrayList<>();
        rows.add(HEADER);
        for (AlignmentEntry e : report.getEntries()) {
            rows.add(row(e));
        }
        int[] widths = new int[HEADER.length];
        for (String[] row : rows) {
            for (int c = 0; c < row.length; c++) {
                widths[c] = Math.max(widths[c], row[c].length());
            }
        }
        for (String[] row : rows) {
            StringBuilder line = new StringBuilder();
            for (int c = 0; c < row.length; c++) {
                if (c == GROUPS_COLUMN && !grouped) {
                    continue;
                }
                boolean last = c == row.length - 1;
                String cell = last ? row[c] : pad(row[c], widths[c], NUMERIC[c]);
                line.append(cell).append(last ? "" : "  ");
            }
            out.append(line.toString().stripTrailing()).append('\n');
        }
        out.append(MARK)
                .append(" = not a multiple of ")
                .append(AlignmentReport.MULTIPLE)
                .append(". FLOPs = share of the 16-bit FLOPs, 2*M*N*K each.\n");
        if (report.getEntries().stream().anyMatch(e -> e.getKind() == LayerKind.LINEAR)) {
            out.append("Linear: M = rows (batch), N = units, K = in features; all three should be")
                    .append(" multiples of 8.\n");
        }
        if (report.getEntries().stream().anyMatch(e -> e.getKind() == LayerKind.CONVOLUTION)) {
            out.append("Convolution (implicit GEMM): M = batch x output positions, N = filters,")
                    .append(" K = in-channels/groups x kernel volume; in and out channels (per")
                    .append(" group) should be multiples of 8, cuDNN tiles M itself.\n");
        }
        out.append(report.getSummary()).append('\n');
        return kernelChecks(report, out).toString();
    }

    /** What the kernel checks found, when the layers have run: one line per defect. */
    private static StringBuilder kernelChecks(AlignmentReport report, StringBuilder out) {
        List<KernelVerdict> verdicts = report.getKernelVerdicts();
        if (verdicts.isEmpty()) {
            return out;
        }
        long defects = verdicts.stream().filter(KernelVerdict::isDefectFound).count();
        out.append("Kernel checks: ")
                .append(verdicts.size())
                .append(" 16-bit kernel signatures checked against fp32, ")
                .append(defects == 0 ? "all right" : defects + " wrong")
                .append('\n');
        for (KernelVerdict verdict : verdicts) {
            if (verdict.isDefectFound()) {
                out.append("  ")
                        .append(String.join(", ", verdict.getPaths()))
                        .append(": ")
                        .append(verdict)
                        .append('\n');
            }
        }
        return out;
    }

    private static String[] row(AlignmentEntry e) {
        String path = LayerNames.displayPath(e.getPath());
        String status = status(e.getStatus());
        if (!e.isKnown()) {
            return new String[] {
                path, e.getLayerName(), "?", "?", "?", "?", "?", "", "", status, e.getSuggestion()
            };
        }
        GemmShape g = e.getGemmShape();
        return new String[] {
            path,
            e.getLayerName(),
            marked(g.getM(), g.isMAligned()),
            marked(g.getN(), g.isNAligned()),
            marked(g.getK(), g.isKAligned()),
            marked(e.getInChannels(), e.isInChannelsAligned()),
            marked(e.getOutChannels(), e.isOutChannelsAligned()),
            String.valueOf(e.getGroups()),
            Suggestions.percent(e.getFlopShare()),
            status,
            e.getSuggestion()
        };
    }

    private static String status(AlignmentStatus status) {
        return switch (status) {
            case ALIGNED -> "yes";
            case MISALIGNED -> "NO";
            case UNKNOWN -> "?";
        };
    }

    private static String marked(long value, boolean aligned) {
        return aligned ? value + " " : value + MARK;
    }

    private static String pad(String cell, int width, boolean right) {
        String spaces = " ".repeat(width - cell.length());
        return right ? spaces + cell : cell + spaces;
    }

    static String csv(AlignmentReport report) {
        StringBuilder out =
                new StringBuilder(
                        "path,layer,kind,status,m,n,k,in_channels,out_channels,groups,m_aligned,"
                                + "n_aligned,k_aligned,in_channels_aligned,out_channels_aligned,"
                                + "flops,flop_share,suggestion\n");
        for (AlignmentEntry e : report.getEntries()) {
            List<String> fields = new ArrayList<>();
            fields.add(e.getPath());
            fields.add(e.getLayerName());
            fields.add(e.getKind().name());
            fields.add(e.getStatus().name());
            if (e.isKnown()) {
                GemmShape g = e.getGemmShape();
                fields.add(String.valueOf(g.getM()));
                fields.add(String.valueOf(g.getN()));
                fields.add(String.valueOf(g.getK()));
                fields.add(String.valueOf(e.getInChannels()));
                fields.add(String.valueOf(e.getOutChannels()));
                fields.add(String.valueOf(e.getGroups()));
                fields.add(String.valueOf(g.isMAligned()));
                fields.add(String.valueOf(g.isNAligned()));
                fields.add(String.valueOf(g.isKAligned()));
                fields.add(String.valueOf(e.isInChannelsAligned()));
                fields.add(String.valueOf(e.isOutChannelsAligned()));
                fields.add(String.valueOf(e.getFlops()));
                fields.add(String.format(Locale.ROOT, "%.6f", e.getFlopShare()));
            } else {
                for (int i = 0; i < 13; i++) {
                    fields.add("");
                }
            }
            fields.add(e.getSuggestion());
            StringBuilder line = new StringBuilder();
            for (String field : fields) {
                if (line.length() > 0) {
                    line.append(',');
                }
                line.append(csvField(field));
            }
            out.append(line).append('\n');
        }
        return out.toString();
    }

    private static String csvField(String field) {
        if (field.contains(",") || field.contains("\"") || field.contains("\n")) {
            return '"' + field.replace("\"", "\"\"") + '"';
        }
        return field;
    }

    /** E.g. {@code 2.64 GFLOPs}. */
    static String flops(long flops) {
        String[] units = {"", "K", "M", "G", "T", "P"};
        double value = flops;
        int unit = 0;
        while (value >= 1000 && unit < units.length - 1) {
            value /= 1000;
            unit++;
        }
        return unit == 0
                ? flops + " FLOPs"
                : String.format(Locale.ROOT, "%.2f %sFLOPs", value, units[unit]);
    }
}
