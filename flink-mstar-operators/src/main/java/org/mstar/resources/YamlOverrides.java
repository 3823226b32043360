package org.mstar.resources;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
        Map<String, Object> perResource = mapping(BLOCK, block);
        Map<String, NodeResourceSpec> byKey = new LinkedHashMap<>();
        specs.forEach(s -> byKey.put(s.resourceKey(), s));
        YamlValues.refuseUnknown(BLOCK, perResource, byKey.keySet());
        perResource.forEach((key, overrides) -> {
            String where = BLOCK + "." + key;
            // An empty block ("kv:") overrides nothing.
            Map<String, Object> fields = overrides == null ? Map.of() : mapping(where, overrides);
            try {
                byKey.get(key).applyYamlOverrides(fields);
            } catch (IllegalArgumentException refused) {
                throw new IllegalArgumentException(where + ": " + refused.getMessage(), refused);
            }
        });
    }

    /** A YAML mapping with its keys as strings; {@code where} names it in the error when it is not one. */
    private static Map<String, Object> mapping(String where, Object block) {
        if (!(block instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(where + " must be a mapping, got " + block.getClass().getSimpleName());
        }
        Map<String, Object> fields = new LinkedHashMap<>();
        m.forEach((field, value) -> fields.put(String.valueOf(field), value));
        return fields;
    }
}
