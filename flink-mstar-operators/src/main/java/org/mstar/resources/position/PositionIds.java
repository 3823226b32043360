package org.mstar.resources.position;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.PosScheme;
import org.mstar.resources.PositionStep;
import org.mstar.resources.kv.KVPlanOutput;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.SequenceView;

/** Host position ids of one step: per KV plan label, one id per planned token in KV's packed view order. */
final class PositionIds {
    private PositionIds() {}

    /**
     * SEQUENTIAL: {@code counter, counter+1, ...} per view; BLOCK: {@code counter} for every token of a view.
     * {@code PositionStep.posIds} replaces a label's ids whole.
     *
     * @throws IllegalArgumentException for an override naming an unplanned label or of the wrong length
     */
    static Map<String, int[]> of(KVPlanOutputs kv, PositionStep step, PosScheme scheme, PositionCounters counters) {
        Map<String, int[]> overrides = step.posIds() == null ? Map.of() : step.posIds();
        for (String label : overrides.keySet()) {
            if (!kv.byLabel().containsKey(label)) {
                throw new IllegalArgumentException("PositionStep.posIds names plan label '" + label
                        + "', which KV did not plan; planned: " + kv.byLabel().keySet());
            }
        }
        Map<String, int[]> ids = new LinkedHashMap<>();
        for (Map.Entry<String, KVPlanOutput> e : kv.byLabel().entrySet()) {
            String label = e.getKey();
            int tokens = e.getValue().indptrs().totalQo();
            int[] override = overrides.get(label);
            if (override == null) {
                ids.put(label, schemeIds(e.getValue().views(), tokens, scheme, counters));
            } else if (override.length == tokens) {
                ids.put(label, override.clone());
            } else {
                throw new IllegalArgumentException("PositionStep.posIds['" + label + "'] has " + override.length
                        + " ids for " + tokens + " planned tokens");
            }
        }
        return ids;
    }

    private static int[] schemeIds(List<SequenceView> views, int tokens, PosScheme scheme, PositionCounters counters) {
        int[] ids = new int[tokens];
        int at = 0;
        for (SequenceView v : views) {
            int counter = counters.position(v.requestId(), v.label());
            for (int t = 0; t < v.toCompute(); t++) {
                ids[at++] = scheme == PosScheme.SEQUENTIAL ? counter + t : counter;
            }
        }
        return ids;
    }
}
