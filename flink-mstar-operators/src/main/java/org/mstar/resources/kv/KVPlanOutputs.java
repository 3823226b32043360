package org.mstar.resources.kv;

import java.util.List;
import java.util.Map;
import org.mstar.resources.Fork;

/**
 * What {@code KVManager.plan} leaves in {@code ctx.planResults()}: one {@link KVPlanOutput} per plan
 * label (insertion order = packing order), plus the step's forks (applied to the padded request ids
 * in {@code forkRids}) so positions can mirror them.
 */
public record KVPlanOutputs(Map<String, KVPlanOutput> byLabel, List<Fork> preForks, List<Fork> postForks,
                            List<String> forkRids) {

    public KVPlanOutput get(String planLabel) {
        KVPlanOutput o = byLabel.get(planLabel);
        if (o == null) {
            throw new IllegalArgumentException("no KV plan for label '" + planLabel + "'; planned: " + byLabel.keySet());
        }
        return o;
    }
}
