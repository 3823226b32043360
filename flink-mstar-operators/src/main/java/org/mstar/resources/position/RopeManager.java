package org.mstar.resources.position;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.RopeParams;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.BucketKey;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Fork;
import org.mstar.resources.Planning;
import org.mstar.resources.PosScheme;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionStep;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Preplanning;
import org.mstar.resources.Publication;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;
import org.mstar.resources.kv.KVPlanOutput;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.SequenceView;
import org.mstar.resources.position.PositionCounters.ForkUndo;

/**
 * Rotary positions over the streams of one KV resource (spec §6).
 *
 * <p>State: per request, per stream label, the next position to hand out (a missing label is at 0).
 * {@link #plan} reads the KV plan of the same step from {@code ctx.planResults()} and builds one I32
 * position-id tensor per KV plan label, in KV's packed token order; the forward rotates q and k at them
 * with {@link #applyQk}; {@link #commit} advances the counters. Forks copy counters exactly when KV copies
 * pages: pre-forks at plan, post-forks at commit after the advance.
 *
 * <p>Capture padding rows of a replay (ids in {@code ctx.paddedRequestIds()} that are not real rows) and
 * KV sink streams get position ids (shapes must match) but no counter is created, forked or advanced
 * for them.
 *
 * <p>Not thread-safe: one step loop drives it.
 */
public final class RopeManager implements Resource, Planning<Map<String, Tensor>>, Preplanning,
        Publication<PublishedPositionInfo>, PrefixCaching {
    private final PositionConfig config;
    private final RopeParams ropeParams;
    private final Device device;

    private static final PublishedPositionCodec CODEC = new PublishedPositionCodec();

    private final PositionCounters counters = new PositionCounters();

    /** The ids the forward rotates at: the last real plan. */
    private PlannedIds current = PlannedIds.NONE;
    /** Live eager id tensors per slot, freed when their slot is planned again (the step that read them is enqueued). */
    private final Map<Integer, PlannedIds> liveBySlot = new HashMap<>();
    /** Per (bucket, slot, plan label), the ids a captured replay reads. */
    private final StaticIntBuffers leasedIds;
    /** A pre-plan waiting to be promoted by the matching real plan, or null. */
    private Staged staged;

    /**
     * @param config   positions config; its {@code kvCache} is this resource's dependency
     * @param headDim  the KV heads' dimension: the rotary dim when the config names none
     * @param device   where position ids are uploaded and RoPE runs
     */
    public RopeManager(PositionConfig config, int headDim, Device device) {
        this.config = config;
        this.device = device;
        this.leasedIds = new StaticIntBuffers(device);
        int rotaryDim = config.rotaryDim() == null ? headDim : config.rotaryDim();
        if (rotaryDim > headDim) {
            throw new IllegalArgumentException("rotary_dim " + rotaryDim + " exceeds the KV head dim " + headDim);
        }
        this.ropeParams = config.llama31()
                ? new RopeParams(rotaryDim, config.interleave(), config.ropeTheta(), config.ropeScale(), true,
                        config.lowFreqFactor(), config.highFreqFactor(), config.oldContextLen())
                : new RopeParams(rotaryDim, config.interleave(), config.ropeTheta(), config.ropeScale(), false, 0, 0, 0);
    }

    // ---------------------------------------------------------------- requests

    @Override
    public Set<String> dependsOn() {
        return Set.of(config.kvCache());
    }

    /** Opens an empty counter map; a second ingest keeps the existing one. */
    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        counters.open(rid);
    }

    /** Every stream of {@code rid} back to position 0. */
    @Override
    public void resetRequest(String rid, boolean free) {
        counters.reset(rid);
    }

    @Override
    public void removeRequest(String rid) {
        counters.remove(rid);
    }

    /** The next position of stream ({@code rid}, {@code label}); 0 for a stream never advanced. */
    public int position(String rid, String label) {
        return counters.position(rid, label);
    }

    // ---------------------------------------------------------------- step cycle

    /**
     * Position ids per KV plan label, uploaded as I32 device tensors of one entry per planned token.
     *
     * <p>Mirrors KV's pre-forks first ({@code counter[to] = counter[from]}); under {@code ctx.isPreplan()}
     * the copies are recorded so {@link #clearPreplan} can undo them, and the result is staged: the real
     * plan of the same (segments, slot) promotes it without planning again.
     *
     * <p>Placement: eager, a fresh tensor of exactly the planned tokens; under a slot lease with a captured
     * bucket, the static buffer of (bucket, slot, label) holding {@code bucket.numTokens()} ids, of which the
     * first are overwritten and the tail keeps stale padding.
     *
     * @return plan label → ids (read-only); also kept for {@link #applyQk} and {@link #posIds}
     */
    @Override
    public Map<String, Tensor> plan(ResourceStep step, StepContext ctx) {
        PositionStep ps = positionStep(step);
        StagedKey key = new StagedKey(ps.segments(), ctx.slot());
        if (staged != null) {
            if (!ctx.isPreplan() && staged.key.equals(key)) {
                PlannedIds promoted = staged.ids;
                staged = null; // its fork undo is dropped: the forks stand
                install(ctx.slot(), promoted);
                return promoted.byLabel();
            }
            clearPreplan();
        }
        KVPlanOutputs kv = kvPlan(ctx);
        List<ForkUndo> undo = ctx.isPreplan() ? new ArrayList<>() : null;
        mirrorForks(kv.preForks(), forkRids(kv, ctx), sinkStreams(kv), ctx, undo);
        PlannedIds ids = place(PositionIds.of(kv, ps, config.scheme(), counters), ctx.slotLease());
        if (ctx.isPreplan()) {
            staged = new Staged(key, ids, undo);
        } else {
            install(ctx.slot(), ids);
        }
        return ids.byLabel();
    }

    /**
     * Advances each segment's counter by {@code step.advance[i]} when given; otherwise, BLOCK: by
     * {@code blockStep} when the segment has new tokens, SEQUENTIAL: by its span. Then mirrors KV's
     * post-forks, so a fork target starts where its source now stands.
     */
    @Override
    public void commit(ResourceStep step, StepContext ctx) {
        PositionStep ps = positionStep(step);
        List<Segment> segments = ps.segments();
        List<Integer> advance = ps.advance();
        if (advance != null && advance.size() != segments.size()) {
            throw new IllegalArgumentException("PositionStep.advance has " + advance.size() + " entries for "
                    + segments.size() + " segments");
        }
        KVPlanOutputs kv = kvPlan(ctx);
        Set<StreamLabel> sinks = sinkStreams(kv);
        for (int i = 0; i < segments.size(); i++) {
            Segment s = segments.get(i);
            if (isPadding(ctx, s.requestId()) || sinks.contains(new StreamLabel(s.requestId(), s.label()))) {
                continue;
            }
            counters.advance(s.requestId(), s.label(), advance != null ? advance.get(i) : defaultAdvance(s.span()));
        }
        mirrorForks(kv.postForks(), forkRids(kv, ctx), sinks, ctx, null);
    }

    /** Undoes the staged pre-plan's fork copies (a target that had no counter loses it again). */
    @Override
    public void clearPreplan() {
        if (staged == null) {
            return;
        }
        counters.undo(staged.undo);
        staged.ids.close();
        staged = null;
    }

    @Override
    public void cleanup() {
        clearPreplan();
        liveBySlot.values().forEach(PlannedIds::close);
        liveBySlot.clear();
        leasedIds.close();
        current = PlannedIds.NONE;
    }

    // ---------------------------------------------------------------- forward

    /** The ids planned for {@code planLabel} in the last real plan, or null if it planned none. */
    public Tensor posIds(String planLabel) {
        return current.byLabel().get(planLabel);
    }

    /**
     * Rotates {@code q [n, qHeads, headDim]} and {@code k [n, kHeads, headDim]} in place at the first
     * {@code n} ids planned for {@code planLabel}, with the configured RoPE (rotary dim, interleave, theta,
     * scale, Llama-3.1 factors).
     */
    public void applyQk(Tensor q, Tensor k, String planLabel) {
        long n = q.dim(0);
        if (k.dim(0) != n) {
            throw new IllegalArgumentException("q has " + n + " rows but k has " + k.dim(0));
        }
        device.ops().rope(q, k, firstIds(planLabel, n), ropeParams);
    }

    /**
     * The first {@code n} ids planned for {@code planLabel}, I32 {@code [n]}: what {@link #applyQk} rotates at,
     * for a forward that rotates inside a fused op (with {@link #ropeParams}). A view, valid until the next plan.
     */
    public Tensor firstIds(String planLabel, long n) {
        Tensor ids = current.byLabel().get(planLabel);
        if (ids == null) {
            throw new IllegalStateException("no positions planned for label '" + planLabel + "'; planned: "
                    + current.byLabel().keySet());
        }
        if (n > ids.dim(0)) {
            throw new IllegalArgumentException(n + " rows to rotate but label '" + planLabel + "' planned "
                    + ids.dim(0) + " positions");
        }
        return n == ids.dim(0) ? ids : ids.rows(0, n);
    }

    /** The RoPE parameters {@link #applyQk} uses. */
    public RopeParams ropeParams() {
        return ropeParams;
    }

    // ---------------------------------------------------------------- publish / retrieve / prefix cache

    /** label → next position for {@code rid}; null when it has no stream with a counter. */
    @Override
    public PublishedPositionInfo publish(String rid) {
        Map<String, Integer> streams = counters.snapshot(rid);
        return streams.isEmpty() ? null : new PublishedPositionInfo(streams);
    }

    @Override
    public Class<PublishedPositionInfo> publishedType() {
        return PublishedPositionInfo.class;
    }

    /** What {@link #publish} exports, as bytes and back. */
    public PublishedPositionCodec codec() {
        return CODEC;
    }

    /**
     * Adopts published counters monotonically (per label, the larger wins), so a stale echo of this node's
     * own publication never rewinds a stream. Always OK: positions never wait.
     */
    @Override
    public AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk, PublishedPositionInfo p) {
        if (p == null) {
            return AdmitOutcome.OK;
        }
        p.counters().forEach((label, next) -> counters.raise(rid, label, next));
        return AdmitOutcome.OK;
    }

    /**
     * Moves the walk's stream past what the cache serves: its counter becomes the absolute prefix length,
     * so a repeated call moves nothing. It happens here rather than at admit because a walk the cache
     * serves whole never admits. Prefix caching keys one stream per walk, the request's main stream
     * ({@link Segment#MAIN}), which is the one moved.
     */
    @Override
    public void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                  CachedPrefix prefix) {
        if (prefix != null) {
            counters.set(rid, Segment.MAIN, prefix.tokens());
        }
    }

    /** SHA-256 over the scheme and every RoPE parameter: anything that changes the rotated keys pages hold. */
    @Override
    public byte[] fingerprint() {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            for (Object field : List.of("rope", config.scheme(), config.blockStep(), ropeParams.rotaryDim(),
                    ropeParams.interleave(), ropeParams.theta(), ropeParams.scale(), ropeParams.llama31(),
                    ropeParams.lowFreqFactor(), ropeParams.highFreqFactor(), ropeParams.oldContextLen())) {
                byte[] bytes = String.valueOf(field).getBytes(StandardCharsets.UTF_8);
                sha.update(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(bytes.length).array());
                sha.update(bytes);
            }
            return sha.digest();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK provides SHA-256", e);
        }
    }

    // ---------------------------------------------------------------- internals

    private static PositionStep positionStep(ResourceStep step) {
        if (step instanceof PositionStep ps) {
            return ps;
        }
        throw new IllegalArgumentException("positions need a PositionStep, got "
                + (step == null ? "null" : step.getClass().getName()));
    }

    private KVPlanOutputs kvPlan(StepContext ctx) {
        return ctx.planOf(config.kvCache(), KVPlanOutputs.class, "positions");
    }

    /** The rows KV applied the forks to; all padded rows when KV names none. */
    private static List<String> forkRids(KVPlanOutputs kv, StepContext ctx) {
        return kv.forkRids() == null ? ctx.paddedRequestIds() : kv.forkRids();
    }

    /** A replay's padding row: it must leave no counter behind. During capture, dummy rows are real. */
    private static boolean isPadding(StepContext ctx, String rid) {
        return !ctx.capture() && ctx.isPaddingRow(rid);
    }

    private int defaultAdvance(int span) {
        if (config.scheme() == PosScheme.BLOCK) {
            return span > 0 ? config.blockStep() : 0;
        }
        return span;
    }

    /**
     * {@code counter[to] = counter[from]} per fork and row, skipping forks that touch a sink stream (KV copies
     * no pages for those); with {@code undo}, records what each target had.
     */
    private void mirrorForks(List<Fork> forks, List<String> rids, Set<StreamLabel> sinks, StepContext ctx,
                             List<ForkUndo> undo) {
        if (forks.isEmpty()) {
            return;
        }
        for (String rid : rids) {
            if (isPadding(ctx, rid)) {
                continue;
            }
            for (Fork f : forks) {
                if (sinks.contains(new StreamLabel(rid, f.from())) || sinks.contains(new StreamLabel(rid, f.to()))) {
                    continue;
                }
                ForkUndo u = counters.fork(rid, f);
                if (undo != null) {
                    undo.add(u);
                }
            }
        }
    }

    private PlannedIds place(Map<String, int[]> hostIds, SlotLease lease) {
        boolean leased = lease != null && lease.bucket() != null;
        Map<String, Tensor> ids = new LinkedHashMap<>();
        hostIds.forEach((label, h) -> ids.put(label, leased
                ? leasedIds.write(new LeasedKey(lease.bucket(), lease.slot(), label), lease.bucket().numTokens(), h)
                : device.fromInts(h, h.length)));
        return new PlannedIds(Collections.unmodifiableMap(ids), !leased);
    }

    private static Set<StreamLabel> sinkStreams(KVPlanOutputs kv) {
        Set<StreamLabel> sinks = new HashSet<>();
        for (KVPlanOutput out : kv.byLabel().values()) {
            for (SequenceView v : out.views()) {
                if (v.sink()) {
                    sinks.add(new StreamLabel(v.requestId(), v.label()));
                }
            }
        }
        return sinks;
    }

    private void install(int slot, PlannedIds ids) {
        PlannedIds old = liveBySlot.put(slot, ids);
        if (old != null && old != ids) {
            old.close();
        }
        current = ids;
    }

    /** One plan's ids; {@code fresh} when they are this plan's own tensors rather than static buffers. */
    private record PlannedIds(Map<String, Tensor> byLabel, boolean fresh) {
        static final PlannedIds NONE = new PlannedIds(Map.of(), false);

        void close() {
            if (fresh) {
                byLabel.values().forEach(Tensor::close);
            }
        }
    }

    private record LeasedKey(BucketKey bucket, int slot, String planLabel) {}

    private record StagedKey(List<Segment> segments, int slot) {}

    private record Staged(StagedKey key, PlannedIds ids, List<ForkUndo> undo) {}
}
