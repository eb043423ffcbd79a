package io.github.djlamp.amp.policy;

import ai.djl.nn.Block;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;

/** Writes and reads the config-map form of a {@link PrecisionPolicy}, specified in package-info. */
final class PolicyMaps {

    static final String POLICY_KEY = "policy";
    static final String PATH_KEY_PREFIX = "override.path.";
    static final String CLASS_KEY_PREFIX = "override.class.";

    private static final String VALID_KEYS =
            "'"
                    + POLICY_KEY
                    + "', '"
                    + PATH_KEY_PREFIX
                    + "<path>', '"
                    + CLASS_KEY_PREFIX
                    + "<class name>'";

    private PolicyMaps() {}

    static PrecisionPolicy fromProperties(Properties properties) {
        Objects.requireNonNull(properties, "properties");
        Map<String, String> map = new LinkedHashMap<>();
        for (String key : properties.stringPropertyNames()) {
            map.put(key, properties.getProperty(key));
        }
        return fromMap(map);
    }

    static Map<String, String> toMap(PrecisionPolicy policy) {
        Map<String, String> map = new LinkedHashMap<>();
        map.put(POLICY_KEY, policy.getName());
        for (Map.Entry<String, CastCategory> e : policy.getPathOverrides().entrySet()) {
            map.put(PATH_KEY_PREFIX + e.getKey(), e.getValue().configName());
        }
        for (Map.Entry<Class<? extends Block>, CastCategory> e :
                policy.getClassOverrides().entrySet()) {
            map.put(CLASS_KEY_PREFIX + e.getKey().getName(), e.getValue().configName());
        }
        return map;
    }

    /**
     * Whether a key that is not a policy key was meant as one (a misspelling such as {@code
     * overide.path.x}): its first segment is within two edits of {@code policy} or {@code
     * override}. Other keys belong to someone else (a model's properties hold DJL's {@code Epoch}
     * and djl-amp's own {@code djl-amp.scaler}) and are ignored.
     */
    static boolean looksLikeAPolicyKey(String key) {
        String head = key.split("\\.", 2)[0].toLowerCase(java.util.Locale.ROOT);
        return editDistance(head, POLICY_KEY) <= 2 || editDistance(head, "override") <= 2;
    }

    private static int editDistance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitute = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitute, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }

    static PrecisionPolicy fromMap(Map<String, String> map) {
        if (map == null || !map.containsKey(POLICY_KEY)) {
            throw new IllegalArgumentException(
                    "Precision policy config has no '"
                            + POLICY_KEY
                            + "' key; it needs one naming the policy ("
                            + Preset.validNames()
                            + ")");
        }
        PrecisionPolicy.Builder builder =
                PrecisionPolicy.builder(PrecisionPolicy.named(valueOf(map, POLICY_KEY)));
        for (String key : map.keySet()) {
            if (key.startsWith(PATH_KEY_PREFIX)) {
                builder.overridePath(key.substring(PATH_KEY_PREFIX.length()), category(map, key));
            } else if (key.startsWith(CLASS_KEY_PREFIX)) {
                builder.overrideClass(
                        BlockClasses.load(key.substring(CLASS_KEY_PREFIX.length())),
                        category(map, key));
            } else if (!POLICY_KEY.equals(key) && looksLikeAPolicyKey(key)) {
                throw new IllegalArgumentException(
                        "Unknown precision policy config key '"
                                + key
                                + "'; valid keys are "
                                + VALID_KEYS);
            }
        }
        return builder.build();
    }

    private static CastCategory category(Map<String, String> map, String key) {
        try {
            return CastCategory.parse(valueOf(map, key));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("Config key '" + key + "': " + e.getMessage(), e);
        }
    }

    private static String valueOf(Map<String, String> map, String key) {
        String value = map.get(key);
        if (value == null) {
            throw new IllegalArgumentException(
                    "Precision policy config key '" + key + "' has no value");
        }
        return value;
    }
}
