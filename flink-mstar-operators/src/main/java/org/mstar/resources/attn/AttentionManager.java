package org.mstar.resources.attn;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.CGSlotSpec;
import org.mstar.resources.GraphBuffers;
import org.mstar.resources.Planning;
import org.mstar.resources.Preplanning;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.KVPlanOutputs;

/**
 * Paged attention over the pages of one KV resource (spec §5.2, §5.3).
 *
 * <p>{@link #plan} reads the KV plan of the same step from {@code ctx.planResults()} and builds one
 * {@link AttentionPlan}: per KV plan label, a device {@code PagedAttentionPlan} (page tables uploaded
 * once per step) with the step's masks. Each layer then calls {@link #run} after writing its K/V through
 * the KV manager; {@link #selectLastHidden} picks each sequence's last token for sampling.
 *
 * <p>Masks: {@code causal} and {@code contextOnly} come from the {@link AttentionStep}; a configured
 * sliding window W becomes {@code windowLeft = W - 1} (-1 = global); the softmax scale is the
 * configured one or {@code 1/sqrt(headDim)}.
 *
 * <p>Not thread-safe: one step loop drives it.
 */
public final class AttentionManager implements Resource, Planning<AttentionPlan>, Preplanning, GraphBuffers {
    private final String kvKey;
    private final Device device;
    private final int windowLeft;
    private final float smScale;
    /** Longest sequence a leased plan's page-table buffers must address: grows, never shrinks. */
    private int maxSeqLen;
    /** Per (bucket, slot, label, array), the page tables a captured replay reads. */
    private final StaticIntBuffers leasedTables;

    /** What the forward reads: the last real plan. */
    private AttentionPlan current;
    /** Live plans per slot, freed when their slot is planned again (the step that read them is enqueued). */
    private final Map<Integer, AttentionPlan> liveBySlot = new HashMap<>();
    /** A pre-plan waiting to be promoted by the matching real plan, or null. */
    private Staged staged;

    /**
     * @param config  attention config; its {@code kvCache} is this resource's dependency
     * @param headDim   the (sharded) KV config's head dim, for the default softmax scale
     * @param maxSeqLen the KV config's longest sequence, in tokens: what a leased page table must hold per row
     * @param device    where plans are uploaded and attention runs
     */
    public AttentionManager(AttentionConfig config, int headDim, int maxSeqLen, Device device) {
        this.kvKey = config.kvCache();
        this.device = device;
        this.maxSeqLen = maxSeqLen;
        this.leasedTables = new StaticIntBuffers(device);
        this.windowLeft = config.slidingWindow() == null ? -1 : config.slidingWindow() - 1;
        this.smScale = config.smScale() != null ? config.smScale().floatValue() : (float) (1.0 / Math.sqrt(headDim));
    }

    @Override
    public Set<String> dependsOn() {
        return Set.of(kvKey);
    }

    /** The scale applied to q·k before the softmax. */
    public float smScale() {
        return smScale;
    }

    /** Keys left of a query's position it may see; -1 for global attention. */
    public int windowLeft() {
        return windowLeft;
    }

    // ---------------------------------------------------------------- step cycle

    /** Leased page tables created from now on address at least {@code maxSeqLen} tokens per sequence. */
    @Override
    public void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen) {
        this.maxSeqLen = Math.max(this.maxSeqLen, maxSeqLen);
    }

    /**
     * One device plan per KV plan label (see {@link AttentionPlan} for eager and leased placement). Under
     * {@code ctx.isPreplan()} the plan is staged; the real plan of the same (segments, slot, masks) promotes
     * it without planning again.
     */
    @Override
    public AttentionPlan plan(ResourceStep step, StepContext ctx) {
        AttentionStep as = attentionStep(step);
        StagedKey key = new StagedKey(as.segments(), ctx.slot(), as.causal(), as.contextOnly());
        if (staged != null) {
            if (!ctx.isPreplan() && staged.key.equals(key)) {
                AttentionPlan promoted = staged.plan;
                staged = null;
                install(ctx.slot(), promoted);
                return promoted;
            }
            clearPreplan();
        }
        AttentionPlan plan = AttentionPlan.build(kvPlan(ctx), as, windowLeft, smScale, device, ctx.slotLease(),
                leasedTables, maxSeqLen);
        if (ctx.isPreplan()) {
            staged = new Staged(key, plan);
        } else {
            install(ctx.slot(), plan);
        }
        return plan;
    }

    /** Planning has no side effect but the staged plan, so dropping it undoes a pre-plan. */
    @Override
    public void clearPreplan() {
        if (staged != null) {
            staged.plan.close();
            staged = null;
        }
    }

    @Override
    public void cleanup() {
        clearPreplan();
        liveBySlot.values().forEach(AttentionPlan::close);
        liveBySlot.clear();
        leasedTables.close();
        current = null;
    }

    // ---------------------------------------------------------------- forward

    /** The last real plan; fails when none ran yet. */
    public AttentionPlan currentPlan() {
        if (current == null) {
            throw new IllegalStateException("attention over '" + kvKey + "' has not planned a step");
        }
        return current;
    }

    /**
     * Attends {@code q [totalQo, qoHeads, headDim]} (this step's tokens of {@code planLabel}, in KV's packed
     * order) against layer {@code layer} of {@code kvPool}, which already holds this step's K/V; writes
     * {@code out} of q's shape. Under a lease q may carry the captured bucket's padding rows past the
     * planned tokens; they are not attended.
     */
    public void run(Tensor q, String planLabel, int layer, Tensor kvPool, Tensor out) {
        device.ops().pagedAttention(q, kvPool, layer, pagedPlan(q, planLabel), out);
    }

    /**
     * As {@link #run}, over a latent (MLA) pool: {@code qLatent [totalQo, H, R + Dr]} (the latent queries) attends
     * layer {@code layer}'s latent rows, writing {@code out [totalQo, H, R]} ({@code LatentAttentionOps}).
     */
    public void runLatent(Tensor qLatent, String planLabel, int layer, Tensor latentPool, Tensor out) {
        device.ops().latentAttention(qLatent, latentPool, layer, pagedPlan(qLatent, planLabel), out);
    }

    /**
     * The last real plan's step of {@code planLabel} as a latent prefill ({@link LatentPrefillPlan}: the keys' pool
     * rows and a ragged causal plan over them), or null when the step is not one for it; built once a step.
     */
    public LatentPrefillPlan latentPrefill(String planLabel) {
        return currentPlan().latentPrefill(planLabel, device);
    }

    /**
     * The device plan of {@code planLabel} in the last real plan: what {@link #run} attends with, for a forward that
     * copies it to the other devices of a tensor-parallel group.
     */
    public PagedAttentionPlan pagedPlan(String planLabel) {
        return currentPlan().label(planLabel).paged();
    }

    private PagedAttentionPlan pagedPlan(Tensor q, String planLabel) {
        AttentionPlan.LabelPlan plan = currentPlan().label(planLabel);
        int planned = plan.paged().totalQo();
        if (q.dim(0) < planned || plan.fresh() && q.dim(0) != planned) {
            throw new IllegalArgumentException("q has " + q.dim(0) + " rows but label '" + planLabel + "' planned "
                    + planned + " tokens");
        }
        return plan.paged();
    }

    /**
     * Gathers each sequence's last new token of {@code planLabel} from {@code hidden [totalQo, ...]} into
     * {@code out [rows, ...]} (rows {@code qoIndptr[1:] - 1}): what sampling reads after a prefill chunk.
     *
     * @throws IllegalStateException when some sequence computes no token this step
     */
    public void selectLastHidden(Tensor hidden, String planLabel, Tensor out) {
        AttentionPlan plan = currentPlan();
        Tensor rows = plan.lastRowsTensor(planLabel);
        if (rows == null) {
            throw new IllegalStateException("label '" + planLabel + "' has a sequence computing no token this step; "
                    + "last rows " + Arrays.toString(plan.lastRows(planLabel)));
        }
        device.ops().gatherRows(hidden, rows, out);
    }

    /** Host copy of {@code qoIndptr[1:] - 1} for {@code planLabel} in the last real plan (-1: no token). */
    public int[] lastRows(String planLabel) {
        return currentPlan().lastRows(planLabel);
    }

    // ---------------------------------------------------------------- internals

    private static AttentionStep attentionStep(ResourceStep step) {
        if (step instanceof AttentionStep as) {
            return as;
        }
        throw new IllegalArgumentException("attention needs an AttentionStep, got "
                + (step == null ? "null" : step.getClass().getName()));
    }

    private KVPlanOutputs kvPlan(StepContext ctx) {
        return ctx.planOf(kvKey, KVPlanOutputs.class, "attention");
    }

    private void install(int slot, AttentionPlan plan) {
        AttentionPlan old = liveBySlot.put(slot, plan);
        if (old != null && old != plan) {
            old.close();
        }
        current = plan;
    }

    private record StagedKey(List<Segment> segments, int slot, boolean causal, boolean contextOnly) {}

    private record Staged(StagedKey key, AttentionPlan plan) {}
}
