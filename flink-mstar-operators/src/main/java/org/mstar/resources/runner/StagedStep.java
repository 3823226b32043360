package org.mstar.resources.runner;

import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What identifies a pre-planned step: the real step may promote the staged plans only if it has the same
 * walk, padded rows, slot lease, graph key and, for each pre-planning resource, the same segments.
 */
record StagedStep(String walk, List<String> paddedRids, SlotLease lease, Object cgKeyInfo,
                  Map<String, List<Segment>> segments) {

    /** The key of {@code step} over the pre-planning resources {@code preplanKeys} it declares. */
    static StagedStep of(SubmoduleStep step, List<String> preplanKeys) {
        StepContext ctx = step.ctx();
        Map<String, List<Segment>> segments = new LinkedHashMap<>();
        preplanKeys.forEach(key -> segments.put(key, step.get(key).segments()));
        return new StagedStep(ctx.graphWalk(), ctx.paddedRequestIds(), ctx.slotLease(), step.cgKeyInfo(), segments);
    }
}
