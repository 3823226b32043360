package org.mstar.resources;

import java.util.Map;
import java.util.Set;

/** Typed reads of one YAML override block, refusing keys it does not know by name. */
final class YamlValues {
    private YamlValues() {}

    static void refuseUnknown(String owner, Map<String, Object> overrides, Set<String> accepted) {
        for (String key : overrides.keySet()) {
            if (!accepted.contains(key)) {
                throw new IllegalArgumentException("unknown override '" + key + "' for " + owner
                        + "; accepted: " + new java.util.TreeSet<>(accepted));
            }
        }
    }

    static int asInt(String key, Object v) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short) {
            return Math.toIntExact(((Number) v).longValue());
        }
        throw new IllegalArgumentException("override '" + key + "' must be an integer, got " + describe(v));
    }

    static boolean asBool(String key, Object v) {
        if (v instanceof Boolean b) {
            return b;
        }
        throw new IllegalArgumentException("override '" + key + "' must be true or false, got " + describe(v));
    }

    static String asString(String key, Object v) {
        if (v instanceof String s) {
            return s;
        }
        throw new IllegalArgumentException("override '" + key + "' must be a string, got " + describe(v));
    }

    static <E extends Enum<E>> E asEnum(String key, Object v, Class<E> type) {
        String s = asString(key, v);
        for (E e : type.getEnumConstants()) {
            if (e.name().equalsIgnoreCase(s)) {
                return e;
            }
        }
        throw new IllegalArgumentException("override '" + key + "' must be one of "
                + java.util.Arrays.toString(type.getEnumConstants()) + ", got '" + s + "'");
    }

    private static String describe(Object v) {
        return v == null ? "null" : v.getClass().getSimpleName() + " " + v;
    }
}
