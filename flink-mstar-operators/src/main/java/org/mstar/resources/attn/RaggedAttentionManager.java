package org.mstar.resources.attn;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.Device;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.BucketKey;
import org.mstar.resources.Planning;
import org.mstar.resources.RaggedAttentionConfig;
import org.mstar.resources.RaggedCrossAttentionStep;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;

/**
 * Cacheless (ragged, varlen) attention (spec §5.5): nothing carries from one step to the next, the layout is
 * the step's own segments. Per label, the spans in declared order give {@code cu_seqlens} (the plan's
 * indptrs); a layer passes the label's q, k and v packed in that order to {@link #run}.
 *
 * <ul>
 *   <li>{@link Kind#SELF}: each span attends itself, bidirectional or causal as the {@link AttentionStep} says
 *       (Whisper's encoder: bidirectional).</li>
 *   <li>{@link Kind#CROSS}: per {@link RaggedCrossAttentionStep} pair {@code (qLabel, kvLabel)}, each request's
 *       qLabel span attends its kvLabel span, never causal; both labels must list the same requests in the same
 *       order. The plan is named {@link RaggedCrossAttentionStep#crossLabel}.</li>
 *   <li>{@link Kind#BLOCK_CAUSAL}: within a span, a token of block b ({@code blockSize} tokens a block from the
 *       span's start) attends every key of blocks 0..b; declared with {@code AttentionStep(causal=false)}.</li>
 * </ul>
 *
 * <p>Capture padding rows are spans like any other (the model declares the capture's template span for them):
 * a span only ever attends itself or its pair, so they cannot change a real row's output. Under a leased
 * bucket the indptrs go to static buffers of (bucket, slot, label) and the grid bounds cover the bucket.
 * Not thread-safe: one step loop drives it.
 */
public final class RaggedAttentionManager implements Resource, Planning<RaggedAttentionPlans> {
    /** Which attention a manager runs: one resource is one kind (spec §5.5). */
    public enum Kind { SELF, CROSS, BLOCK_CAUSAL }

    private final Kind kind;
    private final RaggedAttentionConfig config;
    private final int qoHeads;
    private final int kvHeads;
    private final int blockSize;
    private final float smScale;
    private final Device device;
    private final StaticIntBuffers leasedIndptrs;
    private RaggedAttentionPlans current;
    private final Map<Integer, RaggedAttentionPlans> liveBySlot = new HashMap<>();

    /**
     * @param kind      which attention this resource runs
     * @param config    head geometry (pre-sharding) and bounds
     * @param worldSize ranks the heads are split over
     * @param blockSize tokens a block for {@link Kind#BLOCK_CAUSAL}; ignored otherwise
     * @param device    where plans are uploaded and attention runs
     */
    public RaggedAttentionManager(Kind kind, RaggedAttentionConfig config, int worldSize, int blockSize, Device device) {
        if (config.numQoHeads() % worldSize != 0 || config.numKvHeads() % worldSize != 0) {
            throw new IllegalArgumentException("ragged attention heads " + config.numQoHeads() + "/"
                    + config.numKvHeads() + " do not split over " + worldSize + " ranks");
        }
        if (config.numQoHeads() % config.numKvHeads() != 0) {
            throw new IllegalArgumentException("ragged attention: " + config.numQoHeads()
                    + " query heads do not group over " + config.numKvHeads() + " KV heads");
        }
        if (kind == Kind.BLOCK_CAUSAL && blockSize < 1) {
            throw new IllegalArgumentException("block-causal attention needs block_size >= 1, got " + blockSize);
        }
        this.kind = kind;
        this.config = config;
        this.qoHeads = config.numQoHeads() / worldSize;
        this.kvHeads = config.numKvHeads() / worldSize;
        this.blockSize = blockSize;
        this.smScale = config.smScale() != null ? config.smScale().floatValue()
                : (float) (1.0 / Math.sqrt(config.headDim()));
        this.device = device;
        this.leasedIndptrs = new StaticIntBuffers(device);
    }

    /** Bidirectional or causal self-attention within each span, on one rank. */
    public static RaggedAttentionManager self(RaggedAttentionConfig config, Device device) {
        return new RaggedAttentionManager(Kind.SELF, config, 1, 0, device);
    }

    /** One span of each request attending another, on one rank. */
    public static RaggedAttentionManager cross(RaggedAttentionConfig config, Device device) {
        return new RaggedAttentionManager(Kind.CROSS, config, 1, 0, device);
    }

    /** Block-causal self-attention within each span, on one rank. */
    public static RaggedAttentionManager blockCausal(RaggedAttentionConfig config, int blockSize, Device device) {
        return new RaggedAttentionManager(Kind.BLOCK_CAUSAL, config, 1, blockSize, device);
    }

    public Kind kind() {
        return kind;
    }

    /** Query heads on this rank. */
    public int qoHeads() {
        return qoHeads;
    }

    /** KV heads on this rank. */
    public int kvHeads() {
        return kvHeads;
    }

    public int headDim() {
        return config.headDim();
    }

    /** The scale applied to q·k before the softmax: the configured one or {@code 1/sqrt(headDim)}. */
    public float smScale() {
        return smScale;
    }

    @Override
    public RaggedAttentionPlans plan(ResourceStep step, StepContext ctx) {
        Map<String, List<Segment>> byLabel = new LinkedHashMap<>();
        for (Segment s : step.segments() == null ? List.<Segment>of() : step.segments()) {
            byLabel.computeIfAbsent(s.label(), l -> new ArrayList<>()).add(s);
        }
        Map<String, RaggedAttentionPlans.LabelPlan> plans = new LinkedHashMap<>();
        switch (kind) {
            case SELF -> {
                AttentionStep as = attentionStep(step);
                if (as.contextOnly()) {
                    throw new IllegalArgumentException("ragged attention has no cached context: contextOnly is not "
                            + "meaningful");
                }
                int mask = as.causal() ? RaggedAttentionPlan.CAUSAL : RaggedAttentionPlan.FULL;
                byLabel.forEach((label, segs) -> plans.put(label, labelPlan(label, segs, segs, mask, ctx)));
            }
            case BLOCK_CAUSAL -> {
                AttentionStep as = attentionStep(step);
                if (as.causal() || as.contextOnly()) {
                    throw new IllegalArgumentException("block-causal attention is declared with "
                            + "AttentionStep(causal=false, contextOnly=false): the blocks are the whole mask");
                }
                byLabel.forEach((label, segs) -> plans.put(label, labelPlan(label, segs, segs, blockSize, ctx)));
            }
            case CROSS -> {
                if (!(step instanceof RaggedCrossAttentionStep cs)) {
                    throw new IllegalArgumentException("ragged cross-attention needs a RaggedCrossAttentionStep, got "
                            + step.getClass().getName());
                }
                for (RaggedCrossAttentionStep.Pair pair : cs.pairs()) {
                    List<Segment> qs = declared(byLabel, pair.qLabel());
                    List<Segment> kvs = declared(byLabel, pair.kvLabel());
                    checkSameRequests(pair, qs, kvs);
                    String label = RaggedCrossAttentionStep.crossLabel(pair.qLabel(), pair.kvLabel());
                    plans.put(label, labelPlan(label, qs, kvs, RaggedAttentionPlan.FULL, ctx));
                }
            }
            default -> throw new IllegalStateException("unknown ragged kind " + kind);
        }
        RaggedAttentionPlans result = new RaggedAttentionPlans(plans);
        install(ctx.slot(), result);
        return result;
    }

    @Override
    public void cleanup() {
        liveBySlot.values().forEach(RaggedAttentionPlans::close);
        liveBySlot.clear();
        leasedIndptrs.close();
        current = null;
    }

    // ---------------------------------------------------------------- forward

    /** The last plan; fails when none ran yet. */
    public RaggedAttentionPlans currentPlan() {
        if (current == null) {
            throw new IllegalStateException("ragged attention has not planned a step");
        }
        return current;
    }

    /**
     * Attends {@code q [tokens, qoHeads, headDim]} against {@code k, v [tokens, kvHeads, headDim]}, each holding
     * the spans of {@code planLabel} packed in declared order (for a cross plan, q the query label's spans and
     * k/v the key label's); writes {@code out} of q's shape. Under a lease the tensors may carry rows past
     * the planned tokens; they are not attended.
     *
     * @throws IllegalArgumentException for an undeclared label or tensors that do not fit the plan
     */
    public void run(Tensor q, Tensor k, Tensor v, String planLabel, Tensor out) {
        RaggedAttentionPlans.LabelPlan p = currentPlan().label(planLabel);
        RaggedAttentionPlan plan = p.plan();
        if (q.rank() != 3 || q.dim(1) != qoHeads || q.dim(2) != config.headDim() || k.rank() != 3
                || k.dim(1) != kvHeads || k.dim(2) != config.headDim()) {
            throw new IllegalArgumentException("ragged attention '" + planLabel + "': q " + Arrays.toString(q.shape())
                    + " and k " + Arrays.toString(k.shape()) + " must be [n, " + qoHeads + ", "
                    + config.headDim() + "] and [m, " + kvHeads + ", " + config.headDim() + "]");
        }
        if (q.dim(0) < plan.totalQ() || k.dim(0) < plan.totalKv()
                || p.fresh() && (q.dim(0) != plan.totalQ() || k.dim(0) != plan.totalKv())) {
            throw new IllegalArgumentException("ragged attention '" + planLabel + "': q has " + q.dim(0)
                    + " rows and k " + k.dim(0) + ", the plan packs " + plan.totalQ() + " and " + plan.totalKv());
        }
        device.ops().raggedAttention(q, k, v, plan, out);
    }

    // ---------------------------------------------------------------- internals

    private static AttentionStep attentionStep(ResourceStep step) {
        if (step instanceof AttentionStep as) {
            return as;
        }
        throw new IllegalArgumentException("ragged attention needs an AttentionStep, got "
                + (step == null ? "null" : step.getClass().getName()));
    }

    private static List<Segment> declared(Map<String, List<Segment>> byLabel, String label) {
        List<Segment> segs = byLabel.get(label);
        if (segs == null) {
            throw new IllegalArgumentException("ragged cross-attention pair names label '" + label
                    + "', which has no segments in this step; declared: " + byLabel.keySet());
        }
        return segs;
    }

    private static void checkSameRequests(RaggedCrossAttentionStep.Pair pair, List<Segment> qs, List<Segment> kvs) {
        List<String> q = qs.stream().map(Segment::requestId).toList();
        List<String> kv = kvs.stream().map(Segment::requestId).toList();
        if (!q.equals(kv)) {
            throw new IllegalArgumentException("ragged cross-attention " + pair + ": both labels must list the same "
                    + "requests in the same order, got " + q + " and " + kv);
        }
    }

    private RaggedAttentionPlans.LabelPlan labelPlan(String label, List<Segment> qs, List<Segment> kvs, int mask,
                                                     StepContext ctx) {
        int rows = qs.size();
        int[] qIndptr = indptr(qs);
        int[] kvIndptr = qs == kvs ? qIndptr : indptr(kvs);
        int maxQ = maxSpan(qs);
        int maxKv = qs == kvs ? maxQ : maxSpan(kvs);
        SlotLease lease = ctx.slotLease();
        boolean leased = lease != null && lease.bucket() != null;
        Tensor qt;
        Tensor kvt;
        if (leased) {
            BucketKey bucket = lease.bucket();
            int capacity = Math.max(rows, config.maxSegmentsFor(bucket.bs())) + 1;
            // a captured graph keeps the grid these bounds size, so they cover any step of the bucket
            Integer perBucket = config.maxTokensFor(bucket.bs());
            int bound = Math.max(bucket.numTokens(), perBucket == null ? 0 : perBucket);
            maxQ = Math.max(maxQ, bound);
            maxKv = Math.max(maxKv, bound);
            qt = leasedIndptrs.write(new LeasedKey(bucket, lease.slot(), label, "q"), capacity, qIndptr);
            kvt = qs == kvs ? qt : leasedIndptrs.write(new LeasedKey(bucket, lease.slot(), label, "kv"), capacity, kvIndptr);
        } else {
            qt = device.fromInts(qIndptr, qIndptr.length);
            kvt = qs == kvs ? qt : device.fromInts(kvIndptr, kvIndptr.length);
        }
        RaggedAttentionPlan plan = new RaggedAttentionPlan(rows, qt, kvt, qIndptr[rows], kvIndptr[rows], maxQ, maxKv,
                mask, smScale);
        return new RaggedAttentionPlans.LabelPlan(plan, qs.stream().map(Segment::requestId).toList(), !leased);
    }

    private static int[] indptr(List<Segment> segs) {
        int[] indptr = new int[segs.size() + 1];
        for (int i = 0; i < segs.size(); i++) {
            indptr[i + 1] = indptr[i] + segs.get(i).span();
        }
        return indptr;
    }

    private static int maxSpan(List<Segment> segs) {
        return segs.stream().mapToInt(Segment::span).max().orElse(0);
    }

    private void install(int slot, RaggedAttentionPlans plans) {
        RaggedAttentionPlans old = liveBySlot.put(slot, plans);
        if (old != null && old != plans) {
            old.close();
        }
        current = plans;
    }

    private record LeasedKey(BucketKey bucket, int slot, String planLabel, String part) {}
}
