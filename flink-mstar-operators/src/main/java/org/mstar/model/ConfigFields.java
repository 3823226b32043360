package org.mstar.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.Set;

/**
 * Typed reads of one JSON object from a Hugging Face config file, with errors that name the file and key.
 * A key holding JSON null counts as absent, as in transformers.
 */
final class ConfigFields {
    private final JsonNode node;
    private final String source;

    ConfigFields(JsonNode node, String source) {
        if (node == null || !node.isObject()) {
            throw new ModelFormatException(source + ": expected a JSON object");
        }
        this.node = node;
        this.source = source;
    }

    String source() {
        return source;
    }

    boolean has(String key) {
        JsonNode v = node.get(key);
        return v != null && !v.isNull();
    }

    /** Whether {@code key} is present, even as JSON null. */
    boolean hasKey(String key) {
        return node.has(key);
    }

    /** The value of {@code key}, or null when absent or JSON null. */
    JsonNode get(String key) {
        return has(key) ? node.get(key) : null;
    }

    int requiredInt(String key) {
        if (!has(key)) {
            throw error("missing required key '" + key + "'");
        }
        return toInt(key, node.get(key));
    }

    int optInt(String key, int absent) {
        return has(key) ? toInt(key, node.get(key)) : absent;
    }

    double requiredDouble(String key) {
        if (!has(key)) {
            throw error("missing required key '" + key + "'");
        }
        return optDouble(key, 0);
    }

    double optDouble(String key, double absent) {
        if (!has(key)) {
            return absent;
        }
        JsonNode v = node.get(key);
        if (!v.isNumber()) {
            throw error("'" + key + "' must be a number, got " + v);
        }
        return v.doubleValue();
    }

    boolean optBoolean(String key, boolean absent) {
        if (!has(key)) {
            return absent;
        }
        JsonNode v = node.get(key);
        if (!v.isBoolean()) {
            throw error("'" + key + "' must be true or false, got " + v);
        }
        return v.booleanValue();
    }

    String optString(String key, String absent) {
        if (!has(key)) {
            return absent;
        }
        JsonNode v = node.get(key);
        if (!v.isTextual()) {
            throw error("'" + key + "' must be a string, got " + v);
        }
        return v.textValue();
    }

    /** A token id given as an int, a one-element list, or absent. */
    OptionalInt optTokenId(String key) {
        List<Integer> ids = tokenIds(key);
        if (ids.size() > 1) {
            throw error("'" + key + "' must be a single id, got " + node.get(key));
        }
        return ids.isEmpty() ? OptionalInt.empty() : OptionalInt.of(ids.get(0));
    }

    /** Token ids given as an int or a list of ints; empty when absent. */
    List<Integer> tokenIds(String key) {
        JsonNode v = get(key);
        List<Integer> ids = new ArrayList<>();
        if (v == null) {
            return ids;
        }
        if (v.isArray()) {
            for (JsonNode e : v) {
                ids.add(toInt(key, e));
            }
        } else {
            ids.add(toInt(key, v));
        }
        return ids;
    }

    /** A nested object under {@code key}, named {@code <source> <key>} in errors; null when absent. */
    ConfigFields optObject(String key) {
        return has(key) ? new ConfigFields(node.get(key), source + " " + key) : null;
    }

    /**
     * Refuses, by name, the first key (even one holding null) that is not in {@code known}: a key this library
     * does not read would otherwise change nothing without a word.
     */
    void refuseUnknownKeys(Set<String> known) {
        for (var it = node.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            if (!known.contains(key)) {
                throw error("key '" + key + "' is not supported; supported: " + String.join(", ", known.stream().sorted().toList()));
            }
        }
    }

    ModelFormatException error(String what) {
        return new ModelFormatException(source + ": " + what);
    }

    private int toInt(String key, JsonNode v) {
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
            throw error("'" + key + "' must be an integer, got " + v);
        }
        return v.intValue();
    }
}
