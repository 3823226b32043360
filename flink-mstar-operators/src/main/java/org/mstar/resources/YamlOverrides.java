package org.mstar.resources;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Applies a deployment's {@code resources:} block to the specs it names, one block per resource key, so a
 * model with two pools of one kind (a decoder cache and an encoder context) tunes each on its own:
 *
 * <pre>
 * resources:
 *   kv:
 *     page_size: 16
 *     max_num_pages: 4096
 *   attn:
 *     backend: flashinfer
 * </pre>
 *
 * An unknown resource key or field is an error, never ignored: it would be a setting that silently does
 * nothing.
 */
public final class YamlOverrides {
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());
    private static final String BLOCK = "resources";

    private YamlOverrides() {}

    /**
     * Parse a deployment YAML document and apply its {@code resources:} block; a blank document or one
     * without the block changes nothing.
     *
     * @throws IllegalArgumentException when the document does not parse, or as {@link #apply(List, Map)}
     */
    public static void apply(List<? extends NodeResourceSpec> specs, String deploymentYaml) {
        if (deploymentYaml.isBlank()) {
            return;
        }
        Map<String, Object> config;
        try {
            config = YAML.readValue(deploymentYaml, new TypeReference<Map<String, Object>>() {});
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("deployment YAML does not parse as a mapping: " + e.getOriginalMessage(), e);
        }
        if (config != null) {
            apply(specs, config);
        }
    }

    /**
     * Apply the {@code resources:} entry of an already parsed deployment config. Every resource key is
     * checked before any spec changes.
     *
     * @throws IllegalArgumentException naming an unknown resource key, a block that is not a mapping, or
     *                                  (with its resource key) a field the spec refuses
     */
    public static void apply(List<? extends NodeResourceSpec> specs, Map<String, ?> deploymentConfig) {
        Object block = deploymentConfig.get(BLOCK);
        if (block == null) {
            return;
        }
        if (!(block instanceof Map<?, ?> perResource)) {
            throw new IllegalArgumentException("'" + BLOCK + "' must map resource keys to overrides, got "
                    + block.getClass().getSimpleName());
        }
        Map<String, NodeResourceSpec> byKey = new LinkedHashMap<>();
        specs.forEach(s -> byKey.put(s.resourceKey(), s));
        for (Object key : perResource.keySet()) {
            if (!byKey.containsKey(String.valueOf(key))) {
                throw new IllegalArgumentException(BLOCK + ": unknown resource key '" + key + "'; declared: "
                        + new TreeSet<>(byKey.keySet()));
            }
        }
        for (Map.Entry<?, ?> e : perResource.entrySet()) {
            String key = String.valueOf(e.getKey());
            Map<String, Object> overrides = fields(key, e.getValue());
            try {
                byKey.get(key).applyYamlOverrides(overrides);
            } catch (IllegalArgumentException refused) {
                throw new IllegalArgumentException(BLOCK + "." + key + ": " + refused.getMessage(), refused);
            }
        }
    }

    /** One resource's block as field → value; an empty block ({@code kv:}) overrides nothing. */
    private static Map<String, Object> fields(String key, Object block) {
        if (block == null) {
            return Map.of();
        }
        if (!(block instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(BLOCK + "." + key + " must be a mapping of fields, got "
                    + block.getClass().getSimpleName());
        }
        Map<String, Object> fields = new LinkedHashMap<>();
        m.forEach((field, value) -> fields.put(String.valueOf(field), value));
        return fields;
    }
}
