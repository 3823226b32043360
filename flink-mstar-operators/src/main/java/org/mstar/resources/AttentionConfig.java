package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Paged attention against the KV resource {@code kvCache} (also its dependency). Head geometry is not
 * repeated: it is the KV config's. {@code slidingWindow} W lets position t see keys [t-W+1, t].
 */
public final class AttentionConfig {
    private final String kvCache;
    private AttnBackend backend;
    private String flashinferBackend;
    private final Double smScale;
    private final List<CombinedSplit> splits;
    private final Integer slidingWindow;

    public AttentionConfig(String kvCache, AttnBackend backend, String flashinferBackend, Double smScale,
                           List<CombinedSplit> splits, Integer slidingWindow) {
        if (slidingWindow != null && slidingWindow <= 0) {
            throw new IllegalArgumentException("sliding_window must be > 0 or null, got " + slidingWindow);
        }
        this.kvCache = kvCache;
        this.backend = backend;
        this.flashinferBackend = flashinferBackend;
        this.smScale = smScale;
        this.splits = List.copyOf(splits);
        this.slidingWindow = slidingWindow;
    }

    public AttentionConfig(String kvCache) {
        this(kvCache, AttnBackend.AUTO, "auto", null, List.of(), null);
    }

    public AttentionConfig withSlidingWindow(Integer window) {
        return new AttentionConfig(kvCache, backend, flashinferBackend, smScale, splits, window);
    }

    public AttentionConfig withSmScale(Double scale) {
        return new AttentionConfig(kvCache, backend, flashinferBackend, scale, splits, slidingWindow);
    }

    public String kvCache() { return kvCache; }
    public AttnBackend backend() { return backend; }
    public String flashinferBackend() { return flashinferBackend; }
    public Double smScale() { return smScale; }
    public List<CombinedSplit> splits() { return splits; }
    public Integer slidingWindow() { return slidingWindow; }

    /** Which kernel runs is the deployment's call as much as the model's: backend keys only. */
    void applyYamlOverrides(String owner, Map<String, Object> o) {
        YamlValues.refuseUnknown(owner, o, Set.of("backend", "flashinfer_backend"));
        if (o.containsKey("backend")) backend = YamlValues.asEnum("backend", o.get("backend"), AttnBackend.class);
        if (o.containsKey("flashinfer_backend")) flashinferBackend = YamlValues.asString("flashinfer_backend", o.get("flashinfer_backend"));
    }
}
