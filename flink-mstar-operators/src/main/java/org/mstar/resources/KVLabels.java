package org.mstar.resources;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/** Checks and trims of the per-request KV label layouts, done before a request reaches any worker. */
public final class KVLabels {
    private KVLabels() {}

    /**
     * Refuse a layout for a label the model never declared on that KV resource. The layouts come from the
     * model's own preprocessing, so this is the model's fault, not the client's.
     *
     * @param declared    the labels the model declares on {@code resourceKey}
     * @param kvLayout    label → layout the request carries for {@code resourceKey}
     * @throws ModelFaultException (500-class) naming the model, the resource and the label
     */
    public static void refuseUndeclaredLabels(String model, String resourceKey, Set<String> declared,
                                              Map<String, StreamLayout> kvLayout) {
        for (String label : new TreeSet<>(kvLayout.keySet())) {
            if (!declared.contains(label)) {
                throw new ModelFaultException("model '" + model + "' lays out KV label '" + label
                        + "' on resource '" + resourceKey + "', which it never declared; declared: "
                        + new TreeSet<>(declared));
            }
        }
    }

    /**
     * {@link #refuseUndeclaredLabels(String, String, Set, Map)} over every {@link KVReqConfig} of a request
     * that carries layouts; a resource missing from {@code declaredByKey} declares no labels.
     *
     * @param declaredByKey KV resource key → labels the model declares on it
     * @param configs       the request's configs by resource key
     */
    public static void refuseUndeclaredLabels(String model, Map<String, ? extends Set<String>> declaredByKey,
                                              Map<String, ? extends ResourceReqConfig> configs) {
        configs.forEach((key, cfg) -> {
            if (cfg instanceof KVReqConfig kv && kv.kvLayout() != null) {
                Set<String> declared = declaredByKey.containsKey(key) ? declaredByKey.get(key) : Set.of();
                refuseUndeclaredLabels(model, key, declared, kv.kvLayout());
            }
        });
    }

    /**
     * The configs with layouts and loop caps stripped from every {@link KVReqConfig}: only the KV ingest
     * reads them, and configs travel with every frame between workers.
     *
     * @return a new map in the same order; other configs are passed through as they are
     */
    public static Map<String, ResourceReqConfig> withoutLayouts(Map<String, ? extends ResourceReqConfig> configs) {
        Map<String, ResourceReqConfig> trimmed = new LinkedHashMap<>();
        configs.forEach((key, cfg) -> trimmed.put(key, cfg instanceof KVReqConfig kv ? kv.withoutLayout() : cfg));
        return Collections.unmodifiableMap(trimmed);
    }
}
