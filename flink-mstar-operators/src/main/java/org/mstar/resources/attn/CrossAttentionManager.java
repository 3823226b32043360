package org.mstar.resources.attn;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.CGSlotSpec;
import org.mstar.resources.CrossAttentionConfig;
import org.mstar.resources.GraphBuffers;
import org.mstar.resources.Planning;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.KVPlanOutput;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.SequenceView;

/**
 * Cross-attention against a context written once and never extended (spec §5.4): for Whisper, the decoder's
 * K/V of the encoder output, written by one step into the {@code contextLabel} stream of the KV resource
 * {@code kvCache}. Every later step that attends it declares a zero-span segment on that label, so KV plans
 * the stream's pages.
 *
 * <p>Queries: with a {@code queryKvCache}, one row per view of each of its KV plan labels (the context label
 * excluded when it is the same cache), in KV's packing order; without one, one row per segment of this
 * resource's own step whose label is not the context label, grouped by label in declared order. Keys: each
 * row's request's context stream, all of it (never causal). A padding row with no context attends nothing
 * and gets zeros.
 *
 * <p>Write-once: a step whose segments give the context label a non-zero span for a request whose context
 * an earlier step wrote is refused at admit with a terminal {@link AdmitRuntimeError}; plan checks the same
 * on KV's views, for contexts written by steps this resource did not see.
 *
 * <p>Runs the paged attention kernel ({@code ComputeOps.pagedAttention}) with a full mask: no kernel of its
 * own. Not thread-safe: one step loop drives it.
 */
public final class CrossAttentionManager implements Resource, Admission, Planning<CrossAttentionPlan>, GraphBuffers {
    private final String kvKey;
    private final String queryKvKey;
    private final String contextLabel;
    private final Device device;
    private final float smScale;
    private int maxContextLen;
    private final StaticIntBuffers leasedTables;
    /** Requests whose context a committed step wrote. */
    private final Set<String> written = new HashSet<>();
    private CrossAttentionPlan current;
    private final Map<Integer, CrossAttentionPlan> liveBySlot = new HashMap<>();

    /**
     * @param config        which KV resources hold the context and pack the queries
     * @param headDim       the context KV's (sharded) head dim, for the softmax scale {@code 1/sqrt(headDim)}
     * @param maxContextLen the context KV's longest sequence: what a leased page table holds per row
     * @param device        where plans are uploaded and attention runs
     */
    public CrossAttentionManager(CrossAttentionConfig config, int headDim, int maxContextLen, Device device) {
        this.kvKey = config.kvCache();
        this.queryKvKey = config.queryKvCache();
        this.contextLabel = config.contextLabel();
        this.device = device;
        this.smScale = (float) (1.0 / Math.sqrt(headDim));
        this.maxContextLen = maxContextLen;
        this.leasedTables = new StaticIntBuffers(device);
    }

    @Override
    public Set<String> dependsOn() {
        return queryKvKey == null || queryKvKey.equals(kvKey) ? Set.of(kvKey) : Set.of(kvKey, queryKvKey);
    }

    /** The scale applied to q·k before the softmax. */
    public float smScale() {
        return smScale;
    }

    /** The label of the context stream in the context KV resource. */
    public String contextLabel() {
        return contextLabel;
    }

    /** Whether a committed step wrote {@code rid}'s context. */
    public boolean contextWritten(String rid) {
        return written.contains(rid);
    }

    @Override
    public void resetRequest(String rid, boolean free) {
        written.remove(rid);
    }

    @Override
    public void removeRequest(String rid) {
        written.remove(rid);
    }

    @Override
    public void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen) {
        this.maxContextLen = Math.max(this.maxContextLen, maxSeqLen);
    }

    /** Refuses, terminally, a step that would write more into a context already written. */
    @Override
    public AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        Set<String> extending = new LinkedHashSet<>();
        for (Segment s : segments(step)) {
            if (s.label().equals(contextLabel) && s.span() > 0 && written.contains(s.requestId())) {
                extending.add(s.requestId());
            }
        }
        if (extending.isEmpty()) {
            return AdmitOutcome.OK;
        }
        return AdmitOutcome.refused(new AdmitRuntimeError("cross-attention context '" + contextLabel
                + "' is written once and never extended; already written for " + extending, extending));
    }

    @Override
    public CrossAttentionPlan plan(ResourceStep step, StepContext ctx) {
        KVPlanOutputs contextPlan = kvPlan(ctx, kvKey);
        Map<String, SequenceView> contexts = contexts(contextPlan);
        Map<String, List<CrossAttentionPlan.QueryRow>> rows = new LinkedHashMap<>();
        if (queryKvKey != null) {
            kvPlan(ctx, queryKvKey).byLabel().forEach((label, out) -> {
                if (queryKvKey.equals(kvKey) && label.equals(contextLabel)) {
                    return;
                }
                List<CrossAttentionPlan.QueryRow> labelRows = new ArrayList<>();
                for (SequenceView v : out.views()) {
                    labelRows.add(row(v.requestId(), v.toCompute(), contexts, ctx));
                }
                rows.put(label, labelRows);
            });
        } else {
            for (Segment s : segments(step)) {
                if (!s.label().equals(contextLabel)) {
                    rows.computeIfAbsent(s.label(), l -> new ArrayList<>()).add(row(s.requestId(), s.span(), contexts, ctx));
                }
            }
        }
        int pageSize = contextPlan.byLabel().isEmpty() ? 1 : contextPlan.byLabel().values().iterator().next().pageSize();
        CrossAttentionPlan plan = CrossAttentionPlan.build(rows, pageSize, smScale, device, ctx.slotLease(),
                leasedTables, maxContextLen);
        install(ctx.slot(), plan);
        return plan;
    }

    /** Records which requests' contexts this step wrote (real rows only). */
    @Override
    public void commit(ResourceStep step, StepContext ctx) {
        for (Segment s : segments(step)) {
            if (s.label().equals(contextLabel) && s.span() > 0 && ctx.isRealRow(s.requestId())) {
                written.add(s.requestId());
            }
        }
    }

    @Override
    public void cleanup() {
        liveBySlot.values().forEach(CrossAttentionPlan::close);
        liveBySlot.clear();
        leasedTables.close();
        current = null;
    }

    // ---------------------------------------------------------------- forward

    /** The last plan; fails when none ran yet. */
    public CrossAttentionPlan currentPlan() {
        if (current == null) {
            throw new IllegalStateException("cross-attention over '" + kvKey + "' has not planned a step");
        }
        return current;
    }

    /**
     * Attends {@code q [totalQo, qoHeads, headDim]} (this step's query rows of {@code queryLabel}, in packing
     * order) against the context held in layer {@code layer} of {@code contextPool}, the pool of the KV
     * resource {@code kvCache}; writes {@code out} of q's shape. q may carry padding rows past the planned
     * ones; they are not attended.
     */
    public void run(Tensor q, String queryLabel, int layer, Tensor contextPool, Tensor out) {
        CrossAttentionPlan.LabelPlan plan = currentPlan().label(queryLabel);
        int planned = plan.paged().totalQo();
        if (q.dim(0) < planned || plan.fresh() && q.dim(0) != planned) {
            throw new IllegalArgumentException("q has " + q.dim(0) + " rows but query label '" + queryLabel
                    + "' planned " + planned + " tokens");
        }
        device.ops().pagedAttention(q, contextPool, layer, plan.paged(), out);
    }

    // ---------------------------------------------------------------- internals

    private static List<Segment> segments(ResourceStep step) {
        return step == null || step.segments() == null ? List.of() : step.segments();
    }

    private Map<String, SequenceView> contexts(KVPlanOutputs plan) {
        Map<String, SequenceView> byRid = new HashMap<>();
        KVPlanOutput out = plan.byLabel().get(contextLabel);
        if (out == null) {
            return byRid;
        }
        for (SequenceView v : out.views()) {
            if (v.toCompute() > 0 && v.length() > v.toCompute()) {
                throw new IllegalStateException("cross-attention context '" + contextLabel + "' of '" + v.requestId()
                        + "' is written once and never extended, but this step adds " + v.toCompute() + " tokens to "
                        + (v.length() - v.toCompute()) + " resident");
            }
            byRid.put(v.requestId(), v);
        }
        return byRid;
    }

    private CrossAttentionPlan.QueryRow row(String rid, int queries, Map<String, SequenceView> contexts,
                                            StepContext ctx) {
        SequenceView c = contexts.get(rid);
        if (c == null && !ctx.isPaddingRow(rid)) {
            throw new IllegalStateException("cross-attention: request '" + rid + "' has no segment on context label '"
                    + contextLabel + "' of KV '" + kvKey + "' in this step; declare a zero-span one to attend it");
        }
        return new CrossAttentionPlan.QueryRow(rid, queries, c);
    }

    private static KVPlanOutputs kvPlan(StepContext ctx, String key) {
        return ctx.planOf(key, KVPlanOutputs.class, "cross-attention");
    }

    private void install(int slot, CrossAttentionPlan plan) {
        CrossAttentionPlan old = liveBySlot.put(slot, plan);
        if (old != null && old != plan) {
            old.close();
        }
        current = plan;
    }
}
