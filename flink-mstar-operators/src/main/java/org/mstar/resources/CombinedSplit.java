package org.mstar.resources;

import java.util.List;

/** How a combined plan label is cut back into its source labels' sub-plans. */
public record CombinedSplit(String planLabel, List<String> sourceLabels) {
    public CombinedSplit {
        sourceLabels = List.copyOf(sourceLabels);
    }
}
