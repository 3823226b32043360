package org.mstar.resources.attn;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.RaggedAttentionPlan;

/**
 * One step's ragged attention metadata: per plan label (a segment label, or {@code crossLabel(q, kv)} for a
 * cross pair), the device {@link RaggedAttentionPlan} and the request of each span. Built once per step by
 * {@link RaggedAttentionManager#plan}, read by every layer.
 */
public final class RaggedAttentionPlans {
    private final Map<String, LabelPlan> byLabel;

    RaggedAttentionPlans(Map<String, LabelPlan> byLabel) {
        this.byLabel = Collections.unmodifiableMap(byLabel);
    }

    /**
     * @param fresh whether the index tensors are this plan's own (freed with it) rather than static buffers
     */
    record LabelPlan(RaggedAttentionPlan plan, List<String> requestIds, boolean fresh) {
        void close() {
            if (fresh) {
                plan.qIndptr().close();
                if (plan.kvIndptr() != plan.qIndptr()) {
                    plan.kvIndptr().close();
                }
            }
        }
    }

    /** The plan labels, in the order the step declared them. */
    public Set<String> labels() {
        return byLabel.keySet();
    }

    /** The kernel's plan for {@code planLabel}. */
    public RaggedAttentionPlan plan(String planLabel) {
        return label(planLabel).plan();
    }

    /** The request of each span of {@code planLabel}, in packing order. */
    public List<String> requestIds(String planLabel) {
        return label(planLabel).requestIds();
    }

    LabelPlan label(String planLabel) {
        LabelPlan p = byLabel.get(planLabel);
        if (p == null) {
            // an undeclared label is unattendable (spec §5.5)
            throw new IllegalArgumentException("no ragged attention planned for label '" + planLabel + "'; planned: "
                    + byLabel.keySet());
        }
        return p;
    }

    void close() {
        byLabel.values().forEach(LabelPlan::close);
    }
}
