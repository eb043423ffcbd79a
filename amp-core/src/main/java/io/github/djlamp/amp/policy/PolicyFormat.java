package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Writes and reads the string form of a {@link PrecisionPolicy}; the grammar is in package-info.
 */
final class PolicyFormat {

    static final String PATH_PREFIX = "path:";
    static final String CLASS_PREFIX = "class:";

    private static final String SPECIAL = "\\,=[]";

    private PolicyFormat() {}

    static String format(PrecisionPolicy policy) {
        List<String> entries = new ArrayList<>();
        for (Map.Entry<String, CastCategory> e : policy.getPathOverrides().entrySet()) {
            entries.add(PATH_PREFIX + escape(e.getKey()) + '=' + e.getValue().configName());
        }
        for (Map.Entry<Class<? extends Block>, CastCategory> e :
                policy.getClassOverrides().entrySet()) {
            entries.add(CLASS_PREFIX + e.getKey().getName() + '=' + e.getValue().configName());
        }
        if (entries.isEmpty()) {
            return policy.getName();
        }
        return policy.getName() + '[' + String.join(",", entries) + ']';
    }

    static PrecisionPolicy parse(String text) {
        if (text == null) {
            throw malformed(null, "no text");
        }
        String s = text.trim();
        int open = s.indexOf('[');
        if (open < 0) {
            if (s.indexOf(']') >= 0) {
                throw malformed(text, "']' without '['");
            }
            return withContext(text, () -> PrecisionPolicy.named(s));
        }
        PrecisionPolicy.Builder builder =
                withContext(
                        text,
                        () -> PrecisionPolicy.builder(PrecisionPolicy.named(s.substring(0, open))));
        Set<String> seen = new HashSet<>();
        for (String entry : splitOverrides(text, s, open + 1)) {
            withContext(text, () -> addOverride(text, builder, entry, seen));
        }
        return builder.build();
    }

    /** Splits the text between '[' and the closing ']' on unescaped commas, keeping escapes. */
    private static List<String> splitOverrides(String text, String s, int start) {
        List<String> entries = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        int i = start;
        boolean closed = false;
        while (i < s.length() && !closed) {
            char c = s.charAt(i);
            if (c == '\\') {
                if (i + 1 >= s.length()) {
                    throw malformed(text, "'\\' at the end escapes nothing");
                }
                current.append(c).append(s.charAt(i + 1));
                i += 2;
                continue;
            }
            if (c == '[') {
                throw malformed(text, "unescaped '[' at position " + i);
            }
            if (c == ',' || c == ']') {
                entries.add(current.toString().trim());
                current.setLength(0);
                closed = c == ']';
            } else {
                current.append(c);
            }
            i++;
        }
        if (!closed) {
            throw malformed(text, "missing the closing ']'");
        }
        if (i < s.length()) {
            throw malformed(text, "unexpected text after ']': '" + s.substring(i) + "'");
        }
        for (String entry : entries) {
            if (entry.isEmpty()) {
                throw malformed(text, "an empty override");
            }
        }
        return entries;
    }

    private static Void addOverride(
            String text, PrecisionPolicy.Builder builder, String entry, Set<String> seen) {
        int eq = firstUnescaped(entry, '=');
        if (eq < 0) {
            throw malformed(text, "override '" + entry + "' has no '=CATEGORY'");
        }
        String target = entry.substring(0, eq).trim();
        if (!target.startsWith(PATH_PREFIX) && !target.startsWith(CLASS_PREFIX)) {
            throw malformed(
                    text, "override '" + entry + "' starts with neither 'path:' nor 'class:'");
        }
        CastCategory category = CastCategory.parse(entry.substring(eq + 1));
        if (target.startsWith(PATH_PREFIX)) {
            String path = unescape(target.substring(PATH_PREFIX.length()).trim());
            if (!seen.add(PATH_PREFIX + path)) {
                throw malformed(text, "path '" + path + "' is overridden twice");
            }
            builder.overridePath(path, category);
        } else {
            Class<? extends Block> c = BlockClasses.load(target.substring(CLASS_PREFIX.length()));
            if (!seen.add(CLASS_PREFIX + c.getName())) {
                throw malformed(text, "class " + c.getName() + " is overridden twice");
            }
            builder.overrideClass(c, category);
        }
        return null;
    }

    static String escape(String path) {
        StringBuilder sb = new StringBuilder(path.length());
        for (int i = 0; i < path.length(); i++) {
            char c = path.charAt(i);
            if (SPECIAL.indexOf(c) >= 0) {
                sb.append('\\');
            }
            sb.append(c);
        }
        return sb.toString();
    }

    private static String unescape(String raw) {
        StringBuilder sb = new StringBuilder(raw.length());
        for (int i = 0; i < raw.length(); i++) {
            char c = raw.charAt(i);
            if (c == '\\' && i + 1 < raw.length()) {
                c = raw.charAt(++i);
            }
            sb.append(c);
        }
        return sb.toString();
    }

    private static int firstUnescaped(String s, char wanted) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\') {
                i++;
            } else if (c == wanted) {
                return i;
            }
        }
        return -1;
    }

    private static IllegalArgumentException malformed(String text, String problem) {
        return new MalformedPolicy(
                "Malformed precision policy '"
                        + text
                        + "': "
                        + problem
                        + ". Expected NAME or NAME[path:PATH=CATEGORY,class:CLASS=CATEGORY,...]"
                        + " where NAME is one of "
                        + Preset.validNames()
                        + " and CATEGORY one of "
                        + CastCategory.validNames());
    }

    /** Runs {@code step}, prefixing the policy text to the message of what it rejects. */
    private static <T> T withContext(String text, Supplier<T> step) {
        try {
            return step.get();
        } catch (MalformedPolicy e) {
            throw e;
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(
                    "In precision policy '" + text + "': " + e.getMessage(), e);
        }
    }

    /** A message that already names the policy text, so it is not prefixed again. */
    private static final class MalformedPolicy extends IllegalArgumentException {
        MalformedPolicy(String message) {
            super(message);
        }
    }
}
