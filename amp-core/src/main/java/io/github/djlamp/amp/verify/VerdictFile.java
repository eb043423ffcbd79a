package io.github.djlamp.amp.verify;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The strict text form of a file of kept verdicts: a header, the key the verdicts hold for (what of
 * the machine and libraries changes them), one record per verdict, and a count that a truncated
 * file fails. Fields are tab-separated, with backslash escapes for backslash, tab and line breaks.
 *
 * <pre>
 * djl-amp verdicts 1
 * key &lt;the key&gt;
 * record &lt;kind&gt; &lt;signature&gt; &lt;field&gt;...
 * end &lt;number of records&gt;
 * </pre>
 *
 * <p>Reading fails on anything else, so a damaged file is never half trusted. Writing goes to a
 * temporary file beside the target, moved over it at once: a reader sees the old or the new file.
 */
final class VerdictFile {

    static final String HEADER = "djl-amp verdicts 1";

    /** Why a file was not trusted. */
    static final class Untrusted extends Exception {
        private static final long serialVersionUID = 1L;

        Untrusted(String message) {
            super(message);
        }
    }

    private VerdictFile() {}

    /** The records of a file, each under its kind and signature ({@link #recordId}). */
    static Map<String, List<String>> read(Path file, String key) throws IOException, Untrusted {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        if (lines.isEmpty() || !lines.get(0).equals(HEADER)) {
            throw new Untrusted("it does not start with '" + HEADER + "'");
        }
        if (lines.size() < 3) {
            throw new Untrusted("it is truncated");
        }
        List<String> keyLine = fields(lines.get(1));
        if (keyLine.size() != 2 || !keyLine.get(0).equals("key")) {
            throw new Untrusted("its second line is not its key");
        }
        if (!keyLine.get(1).equals(key)) {
            throw new Untrusted(
                    "it was written for another machine or other libraries (its key differs)");
        }
        Map<String, List<String>> records = new LinkedHashMap<>();
        for (int i = 2; i < lines.size() - 1; i++) {
            List<String> fields = fields(lines.get(i));
            if (fields.size() < 3 || !fields.get(0).equals("record")) {
                throw new Untrusted("line " + (i + 1) + " is not a record");
            }
            records.put(recordId(fields.get(1), fields.get(2)), fields.subList(3, fields.size()));
        }
        List<String> end = fields(lines.get(lines.size() - 1));
        if (end.size() != 2
                || !end.get(0).equals("end")
                || !end.get(1).equals(String.valueOf(lines.size() - 3))) {
            throw new Untrusted("it is truncated (its last line is not 'end' and its count)");
        }
        return records;
    }

    /** Writes {@code records} under {@code key}, replacing the file at once. */
    static void write(Path file, String key, Map<String, List<String>> records) throws IOException {
        StringBuilder sb = new StringBuilder(HEADER).append('\n');
        sb.append(line(Arrays.asList("key", key)));
        for (Map.Entry<String, List<String>> record : records.entrySet()) {
            List<String> fields = new ArrayList<>();
            fields.add("record");
            fields.addAll(Arrays.asList(record.getKey().split("\t", 2)));
            fields.addAll(record.getValue());
            sb.append(line(fields));
        }
        sb.append(line(Arrays.asList("end", String.valueOf(records.size()))));
        Files.createDirectories(file.getParent());
        Path temporary = Files.createTempFile(file.getParent(), file.getFileName() + ".", ".tmp");
        try {
            Files.writeString(temporary, sb, StandardCharsets.UTF_8);
            try {
                Files.move(
                        temporary,
                        file,
                        StandardCopyOption.ATOMIC_MOVE,
                        StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(temporary);
        }
    }

    /** The identity of a record in a file: its kind and signature, tab-joined. */
    static String recordId(String kind, String signature) {
        return kind + "\t" + signature;
    }

    private static String line(List<String> fields) {
        StringBuilder sb = new StringBuilder();
        for (String field : fields) {
            if (sb.length() > 0) {
                sb.append('\t');
            }
            sb.append(escape(field));
        }
        return sb.append('\n').toString();
    }

    private static String escape(String field) {
        return field.replace("\\", "\\\\")
                .replace("\t", "\\t")
                .replace("\n", "\\n")
                .replace("\r", "\\r");
    }

    private static List<String> fields(String line) throws Untrusted {
        List<String> fields = new ArrayList<>();
        StringBuilder field = new StringBuilder();
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (c == '\t') {
                fields.add(field.toString());
                field.setLength(0);
            } else if (c == '\\') {
                if (++i == line.length()) {
                    throw new Untrusted("a line ends in an unfinished escape");
                }
                switch (line.charAt(i)) {
                    case '\\' -> field.append('\\');
                    case 't' -> field.append('\t');
                    case 'n' -> field.append('\n');
                    case 'r' -> field.append('\r');
                    default -> throw new Untrusted("a line has an unknown escape");
                }
            } else {
                field.append(c);
            }
        }
        fields.add(field.toString());
        return fields;
    }
}
