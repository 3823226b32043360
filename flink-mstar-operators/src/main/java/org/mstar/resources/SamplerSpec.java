package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A sampler's capabilities, fixed at capture; per-request parameters choose what actually happens.
 * {@code minTokensStopIds} are masked until a request's {@code minTokens} are generated.
 */
public record SamplerSpec(String resourceKey, Set<String> nodes, Integer vocabSize, boolean enableRepetitionPenalty,
                          boolean enableMinP, int maxRepetitionWindow, List<Integer> minTokensStopIds,
                          boolean enableTopPFirst) implements NodeResourceSpec {
    public SamplerSpec {
        nodes = Set.copyOf(nodes);
        minTokensStopIds = List.copyOf(minTokensStopIds);
        if (maxRepetitionWindow < 0) throw new IllegalArgumentException("max_repetition_window must be >= 0");
    }

    /** Penalty on, everything optional off. */
    public SamplerSpec(String resourceKey, Set<String> nodes, int vocabSize) {
        this(resourceKey, nodes, vocabSize, true, false, 0, List.of(), false);
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> overrides) {
        YamlValues.refuseUnknown("SamplerSpec '" + resourceKey + "'", overrides, Set.of());
    }
}
