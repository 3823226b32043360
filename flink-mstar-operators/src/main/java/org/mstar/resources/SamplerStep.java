package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The sampler's part of a step. {@code prefillTrackedTokens} are prompt ids that enter the penalty's
 * seen set at plan; {@code keptRids} (null = all) are the rows whose token is kept and whose RNG offset
 * advances.
 */
public final class SamplerStep extends ResourceStep {
    private final boolean applyPenalty;
    private final boolean applyFilters;
    private final Map<String, int[]> prefillTrackedTokens;
    private final Set<String> keptRids;

    public SamplerStep(List<Segment> segments, boolean applyPenalty, boolean applyFilters,
                       Map<String, int[]> prefillTrackedTokens, Set<String> keptRids) {
        super(segments);
        this.applyPenalty = applyPenalty;
        this.applyFilters = applyFilters;
        this.prefillTrackedTokens = Map.copyOf(prefillTrackedTokens);
        this.keptRids = keptRids == null ? null : Set.copyOf(keptRids);
    }

    public SamplerStep() {
        this(null, true, true, Map.of(), null);
    }

    public boolean applyPenalty() { return applyPenalty; }
    public boolean applyFilters() { return applyFilters; }
    public Map<String, int[]> prefillTrackedTokens() { return prefillTrackedTokens; }
    public Set<String> keptRids() { return keptRids; }

    public boolean kept(String rid) {
        return keptRids == null || keptRids.contains(rid);
    }
}
