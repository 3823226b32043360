package org.mstar.resources.kv;

import java.util.List;

/**
 * KV's plan for one plan label: the views in packed order, their page-table arrays, and the write
 * address (page, offset) of every new token in the same order as the query rows.
 */
public record KVPlanOutput(String planLabel, int pageSize, List<SequenceView> views, PagedIndptrs indptrs,
                           int[] writePages, int[] writeOffsets) {
    public KVPlanOutput {
        views = List.copyOf(views);
    }

    /** Every view computes exactly one token. */
    public boolean isDecode() {
        return !views.isEmpty() && views.stream().allMatch(v -> v.toCompute() == 1);
    }
}
