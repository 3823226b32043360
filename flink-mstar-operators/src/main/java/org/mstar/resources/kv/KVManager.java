package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Fork;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.KVStep;
import org.mstar.resources.Offload;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Planning;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.Preplanning;
import org.mstar.resources.Publication;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;
import org.mstar.resources.StreamLayout;

/**
 * The paged KV cache: fixed-size pages of one device pool, handed to (request, label) streams as they
 * grow, shared between requests through a prefix cache, moved to host memory under pressure and
 * between caches for prefill/decode disaggregation.
 *
 * <p>Per step ({@link Resource} has the call order of the capabilities):
 * <ol>
 *   <li>{@link #admit}: reserve pages for the step's new tokens (converting prefix-cache leases,
 *       reserving fork targets). All or nothing: a refusal changes nothing, and {@link #rollbackAdmit}
 *       gives back exactly what a successful admit took.</li>
 *   <li>{@link #plan}: apply pre-forks (full page copies), then a {@link KVPlanOutputs} with the
 *       views, page tables and write addresses per plan label.</li>
 *   <li>forward: layers call {@link #writeKv} with the step's K and V and attend over {@link #pool()}.</li>
 *   <li>{@link #commit}: count the tokens, index filled pages, apply retention, then post-forks.</li>
 * </ol>
 *
 * <p>Sink rows (streams in {@link KVStep#sink()}, and a replay's padding rows) reserve, address and
 * commit nothing: their writes go to the sink page, page 0, which is never handed out.
 *
 * <p>Thread-safety: every public method holds this manager's lock.
 */
public final class KVManager implements Resource, Admission, Planning<KVPlanOutputs>, Preplanning,
        Publication<PublishedKVInfo>, PrefixCaching, Offload {
    // ---------------------------------------------------------------- configuration
    private final PagedKVConfig config;
    /** The pool's element type. */
    private final DType kvDType;
    private final int worldSize;

    // ---------------------------------------------------------------- state
    private final KVState st;
    private final KVAdmission admission;
    private final PrefixLeases leases;
    /** Null when {@code cpu_offload_pages} is 0. */
    private final HostOffload offload;
    private final KvRetriever retriever;
    private final PublishedKVCodec codec;
    /** What each admitted step took (by identity), until it commits or is rolled back. */
    private final Map<KVStep, AdmitLedger> admitted = new IdentityHashMap<>();
    private StagedPlan staged;
    /** The plan {@link #writeKv} addresses, and its address tensors uploaded once per plan label. */
    private KVPlanOutputs activePlan;
    private final Map<String, Tensor[]> writeAddresses = new HashMap<>();
    /** Per plan label, views of the static buffers a leased step writes through (not owned). */
    private final Map<String, Tensor[]> leasedAddresses = new HashMap<>();
    private final LeasedWriteAddresses leasedWrites;
    /** Set by {@link #cleanup}: the pool is gone, so lent pages can no longer be copied. */
    private boolean closed;

    /**
     * @param config    the pool; sharded here to this rank's head slice ({@code shard} is idempotent)
     * @param device    where the pool lives
     * @param kvDType   the model's element type: the pool's unless the config's cache dtype says otherwise
     * @param worldSize ranks of the TP×SP group this cache is one shard of
     * @param rank      this shard's rank in that group
     * @param transport moves pages to and from other caches; null for a cache that never retrieves
     */
    public KVManager(PagedKVConfig config, Device device, DType kvDType, int worldSize, int rank,
                     KvTransport transport) {
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank " + rank + " outside a world of " + worldSize);
        }
        config.shard(worldSize);
        this.config = config;
        this.worldSize = worldSize;
        KvPool pool = KvPool.forConfig(config, device, kvDType);
        this.kvDType = pool.dtype();
        this.st = new KVState(config, pool);
        this.admission = new KVAdmission(st);
        this.leases = new PrefixLeases(st);
        this.offload = config.cpuOffloadPages() > 0 ? new HostOffload(st, new HostPagePool(pool, config.cpuOffloadPages())) : null;
        this.retriever = new KvRetriever(st, transport, worldSize, rank);
        this.codec = new PublishedKVCodec(pool, this::gatherPages, worldSize, rank);
        this.leasedWrites = new LeasedWriteAddresses(device);
        if (transport != null) {
            transport.bind(this::exportPages);
        }
    }

    /** A staged pre-plan: keyed on (segments, slot), holding what its admit and plan did. */
    private static final class StagedPlan {
        final List<Segment> segments;
        final int slot;
        final AdmitLedger ledger;
        KVPlanOutputs result;

        StagedPlan(List<Segment> segments, int slot, AdmitLedger ledger) {
            this.segments = segments;
            this.slot = slot;
            this.ledger = ledger;
        }

        boolean matches(KVStep step, StepContext ctx) {
            return segments.equals(step.segments()) && slot == slotOf(ctx);
        }

        static int slotOf(StepContext ctx) {
            return ctx.slotLease() != null ? ctx.slotLease().slot() : ctx.slot();
        }
    }

    // ---------------------------------------------------------------- requests

    /** Open the request with a "main" stream; a second call changes nothing. */
    @Override
    public synchronized void ingestRequest(String rid, ResourceReqConfig cfg) {
        if (cfg != null && !(cfg instanceof KVReqConfig)) {
            throw new IllegalArgumentException("KV ingest takes a KVReqConfig, got " + cfg.getClass().getSimpleName());
        }
        KVReqConfig c = cfg == null ? KVReqConfig.defaults() : (KVReqConfig) cfg;
        st.requests.computeIfAbsent(rid, id -> {
            RequestState r = new RequestState(id, c);
            r.streams.put(Segment.MAIN, st.newStream(r, Segment.MAIN));
            return r;
        });
    }

    /**
     * Empty every stream of the request. {@code free} returns its pages; otherwise they stay as spare
     * capacity, unless one is sealed (shared content is never rewound onto).
     */
    @Override
    public synchronized void resetRequest(String rid, boolean free) {
        RequestState r = st.request(rid);
        if (r == null) {
            return;
        }
        for (CacheStream s : r.streams.values()) {
            if (offload != null) {
                offload.discard(s);
            }
            st.dropLease(s);
            if (free || s.pages.stream().anyMatch(st.arena::isSealed)) {
                st.dropPages(s);
            }
            s.readFuture = null;
            s.readPages = null;
            s.readError = null;
            s.remoteResetGeneration = -1;
            s.storedLen = 0;
            s.released = 0;
            s.protectedPrefix = null;
            s.retention = null;
            s.stepInFlight = false;
            s.chain = st.prefix == null ? null : st.prefix.chainFor(r.cfg, s.label);
            s.generation++;
            s.resetGeneration++;
        }
    }

    /** Free everything the request holds: device pages, leases, host pages. Unknown ids are ignored. */
    @Override
    public synchronized void removeRequest(String rid) {
        RequestState r = st.requests.remove(rid);
        if (r == null) {
            return;
        }
        for (CacheStream s : r.streams.values()) {
            if (offload != null) {
                offload.discard(s);
            }
            st.dropPages(s);
        }
    }

    // ---------------------------------------------------------------- step cycle

    /**
     * Reserve pages for the step. A staged pre-plan of the same (segments, slot) is promoted: its pages
     * are already reserved, so this returns OK at once; a different step first clears it.
     */
    @Override
    public synchronized AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        KVStep kv = (KVStep) step;
        if (staged != null) {
            if (!ctx.isPreplan() && staged.matches(kv, ctx)) {
                return AdmitOutcome.OK;
            }
            clearPreplan();
        }
        KVAdmission.Result res = admission.admit(kv, ctx);
        if (res.ledger() != null) {
            if (ctx.isPreplan()) {
                staged = new StagedPlan(kv.segments(), StagedPlan.slotOf(ctx), res.ledger());
            } else {
                admitted.merge(kv, res.ledger(), (earlier, later) -> {
                    earlier.absorb(later);
                    return earlier;
                });
            }
        }
        return res.outcome();
    }

    /**
     * Give back what this step's admit freshly took: its new pages, streams it created, leases it
     * converted (they become leases again), its in-flight marks. A refused admit took nothing.
     */
    @Override
    public synchronized void rollbackAdmit(ResourceStep step, StepContext ctx) {
        KVStep kv = (KVStep) step;
        if (staged != null && (staged.ledger.step == kv || staged.matches(kv, ctx))) {
            admission.rollback(staged.ledger);
            staged = null;
        } else {
            AdmitLedger ledger = admitted.remove(kv);
            if (ledger != null) {
                admission.rollback(ledger);
            }
        }
    }

    /**
     * Apply pre-forks and build the step's {@link KVPlanOutputs}. Under {@code ctx.isPreplan()} the
     * result is staged (and becomes what {@link #writeKv} addresses only when promoted); a later real
     * plan of the same step returns it without re-planning.
     */
    @Override
    public synchronized KVPlanOutputs plan(ResourceStep step, StepContext ctx) {
        KVStep kv = (KVStep) step;
        if (!ctx.isPreplan() && staged != null) {
            if (staged.matches(kv, ctx) && staged.result != null) {
                KVPlanOutputs promoted = staged.result;
                admitted.put(kv, staged.ledger);
                staged = null;
                activate(promoted, ctx);
                return promoted;
            }
            clearPreplan();
        }
        if (ctx.isPreplan() && (staged == null || !staged.matches(kv, ctx))) {
            throw new IllegalStateException("pre-plan of a step that was not pre-admitted");
        }
        List<String> forkRows = StepRows.forkRows(kv, ctx);
        for (String rid : forkRows) {
            for (Fork f : kv.preForks()) {
                if (!StepRows.forkSkipped(kv, ctx, rid, f)) {
                    Forks.Undo undo = Forks.apply(st, rid, f);
                    if (undo != null && ctx.isPreplan()) {
                        staged.ledger.forks.add(undo);
                    }
                }
            }
        }
        KVPlanOutputs out = KVPlanner.plan(st, kv, ctx, forkRows);
        if (ctx.isPreplan()) {
            staged.result = out;
        } else {
            activate(out, ctx);
        }
        return out;
    }

    /**
     * Make {@code plan} the one {@link #writeKv} addresses. A leased step (a captured bucket) writes its
     * addresses into static buffers now, before any graph replays; an eager one uploads them on first use.
     */
    private void activate(KVPlanOutputs plan, StepContext ctx) {
        for (Tensor[] t : writeAddresses.values()) {
            t[0].close();
            t[1].close();
        }
        writeAddresses.clear();
        leasedAddresses.clear();
        activePlan = plan;
        SlotLease lease = ctx == null ? null : ctx.slotLease();
        if (plan != null && lease != null && lease.bucket() != null) {
            plan.byLabel().forEach((label, out) -> {
                int n = out.writePages().length;
                if (n > 0) {
                    Tensor[] whole = leasedWrites.write(lease, out);
                    leasedAddresses.put(label, new Tensor[] {whole[0].rows(0, n), whole[1].rows(0, n)});
                }
            });
        }
    }

    /**
     * Count the step's tokens (a committing step's non-sink spans), adopt and apply retention, offer
     * filled pages to the prefix index, then apply post-forks. In-flight marks clear either way.
     */
    @Override
    public synchronized void commit(ResourceStep step, StepContext ctx) {
        KVStep kv = (KVStep) step;
        for (Segment seg : kv.segments()) {
            CacheStream s = StepRows.isSink(kv, ctx, seg) ? null : st.stream(seg.requestId(), seg.label());
            if (s == null) {
                continue;
            }
            s.stepInFlight = false;
            if (!kv.commit() || seg.span() == 0) {
                continue;
            }
            s.storedLen += seg.span();
            RetentionPolicy policy = retentionFor(kv, seg);
            if (policy != null) {
                RetentionWindow.adopt(s, policy);
            }
            String rid = seg.requestId();
            if (ctx.isRealRow(rid) && !ctx.capture() && st.prefix != null && st.prefix.keyedWalk(ctx.walkOf(rid))) {
                st.prefix.indexCommitted(s, seg.span());
            }
            s.generation++;
            if (s.retention != null) {
                RetentionWindow.apply(st, s);
            }
        }
        for (String rid : StepRows.forkRows(kv, ctx)) {
            for (Fork f : kv.postForks()) {
                if (!StepRows.forkSkipped(kv, ctx, rid, f)) {
                    Forks.apply(st, rid, f);
                }
            }
        }
        admitted.remove(kv);
    }

    /** The step's policy for the stream, else the one its request's layout declares. */
    private RetentionPolicy retentionFor(KVStep step, Segment seg) {
        RetentionPolicy p = step.retention().get(new StreamLabel(seg.requestId(), seg.label()));
        if (p != null) {
            return p;
        }
        Map<String, StreamLayout> layouts = st.requireRequest(seg.requestId()).cfg.kvLayout();
        StreamLayout layout = layouts == null ? null : layouts.get(seg.label());
        return layout == null ? null : layout.retention();
    }

    /** Undo a staged pre-plan: fork targets, streams it created and its in-flight marks. */
    @Override
    public synchronized void clearPreplan() {
        if (staged != null) {
            admission.clearStaged(staged.ledger);
            staged = null;
        }
    }

    // ---------------------------------------------------------------- forward-facing API

    /**
     * The device pool that attention reads: {@code [layers, pages, 2, pageSize, kvHeads, headDim]}, or for the MLA
     * layout {@code [layers, pages, 1, pageSize, 1, kv_lora_rank + qk_rope_head_dim]}.
     */
    public Tensor pool() {
        return st.pool.tensor();
    }

    /**
     * Write the current step's K and V of one layer for one plan label at the planned addresses.
     *
     * @param k {@code [n, kvHeads, headDim]}, n = the plan label's new tokens, in plan order
     * @param v same shape as {@code k}
     */
    public void writeKv(Tensor k, Tensor v, int layer, String planLabel) {
        if (v.dim(0) != k.dim(0)) {
            throw new IllegalArgumentException("K has " + k.dim(0) + " rows but V has " + v.dim(0));
        }
        writeKv(layer, planLabel, k.dim(0), (pool, l, pages, offsets) -> st.pool.append(l, k, v, pages, offsets));
    }

    /**
     * Run {@code writer} with the current step's write addresses for one layer and plan label, so a fused op
     * (one that computes K and V and stores them in the same pass) writes where {@link #writeKv} would. Leased
     * steps hand over their static buffers, so the writer may be captured into a graph.
     *
     * @param tokens the rows the writer stores: the plan label's new tokens, in plan order
     */
    public synchronized void writeKv(int layer, String planLabel, long tokens, KvWriter writer) {
        if (activePlan == null) {
            throw new IllegalStateException("writeKv before any plan");
        }
        KVPlanOutput out = activePlan.get(planLabel);
        int n = out.writePages().length;
        if (tokens != n) {
            throw new IllegalArgumentException("plan label '" + planLabel + "' writes " + n + " tokens, got " + tokens);
        }
        if (n == 0) {
            return;
        }
        Device device = st.pool.device();
        Tensor[] addr = leasedAddresses.containsKey(planLabel) ? leasedAddresses.get(planLabel)
                : writeAddresses.computeIfAbsent(planLabel, l -> new Tensor[] {
                device.fromInts(out.writePages(), n), device.fromInts(out.writeOffsets(), n)});
        writer.write(pool(), layer, addr[0], addr[1]);
    }

    /**
     * K and V of a stream's committed tokens in one layer, read through its page table: each
     * {@code [storedLen, kvHeads, headDim]} as fp32.
     */
    public synchronized float[][] readKv(String rid, String label, int layer) {
        CacheStream s = st.stream(rid, label);
        if (s == null) {
            throw new IllegalArgumentException("no stream " + label + " of '" + rid + "'");
        }
        if (s.offloaded) {
            throw new IllegalStateException("stream " + label + " of '" + rid + "' is offloaded");
        }
        return st.pool.readTokens(layer, s.pageIds(0, st.pagesFor(s.storedLen)), s.storedLen);
    }

    // ---------------------------------------------------------------- retention

    /** Protect the stream's first {@code tokens} from retention; once, before any release. */
    public synchronized void protectPrefix(String rid, String label, int tokens) {
        RetentionWindow.protect(requireStream(rid, label), tokens);
    }

    /**
     * Release up to {@code pages} of the oldest whole pages past the protected prefix.
     *
     * @return pages released
     * @throws IllegalStateException while a step is in flight, the stream is offloaded or a read pending
     */
    public synchronized int releaseOldest(String rid, String label, int pages) {
        CacheStream s = requireStream(rid, label);
        if (s.stepInFlight || s.offloaded || s.readPending()) {
            throw new IllegalStateException("stream " + label + " of '" + rid + "' is busy (in flight, offloaded or reading)");
        }
        return RetentionWindow.releaseOldest(st, s, pages);
    }

    private CacheStream requireStream(String rid, String label) {
        CacheStream s = st.stream(rid, label);
        if (s == null) {
            throw new IllegalArgumentException("no stream " + label + " of '" + rid + "'");
        }
        return s;
    }

    // ---------------------------------------------------------------- prefix cache

    /** Layout, page size, dtype, salt and world size: anything that changes what a stored page means. */
    @Override
    public byte[] fingerprint() {
        return PrefixKeys.fingerprint("paged-kv", config.layout(), config.pageSize(), kvDType,
                config.prefixCacheSalt(), worldSize);
    }

    /**
     * Open the prefix cache under {@code root}, keying streams of {@code walks}. Off when the config
     * says so, and for a TP world unless {@code prefix_cache_tp} is set (ranks would match differently).
     * Opening again under a new root keeps the index, whose old keys are then unreachable and age out.
     */
    @Override
    public synchronized boolean enablePrefixCache(byte[] root, Set<String> walks) {
        if (!config.prefixCache() || (worldSize > 1 && !config.prefixCacheTp())) {
            return false;
        }
        PrefixIndex index = st.prefix == null ? new PrefixIndex(st.arena) : st.prefix.index();
        st.prefix = new PrefixCache(root, walks, index, st.pageSize);
        return true;
    }

    @Override
    public synchronized boolean keysPrefixChains() {
        return st.prefix != null;
    }

    /**
     * Lease the cached pages matching the walk's streams' keys, stopping one key short so at least one
     * token runs, and answer their length (the minimum over the walk's labels). Null (no opinion) when
     * the walk or a label is not keyed or a stream is not empty. A repeated probe answers the same
     * length and takes no extra reference.
     */
    @Override
    public synchronized CachedPrefix resolveCachedPrefix(String rid, String nodeName, String graphWalk,
                                                         Map<String, int[]> inputs) {
        return leases.resolve(rid, nodeName, graphWalk);
    }

    /** Trim each lease of the walk to the agreed prefix in whole pages (all of it when none was agreed). */
    @Override
    public synchronized void applyCachedPrefix(String rid, String nodeName, String graphWalk, Map<String, int[]> inputs,
                                               CachedPrefix prefix) {
        leases.trim(rid, nodeName, graphWalk, prefix);
    }

    /** The cache served the whole walk, which will never admit: its leases become the streams' content. */
    @Override
    public synchronized void completeCachedWalk(String rid, String nodeName, String graphWalk) {
        leases.complete(rid, nodeName, graphWalk);
    }

    /** On rank 0: probe, and hand out the leased pages of the walk's one keyed label for followers to adopt. */
    @Override
    public synchronized List<Integer> leaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        return leases.leaseForFollowers(rid, nodeName, graphWalk);
    }

    /**
     * On a follower: lease the pages rank 0 leased. False while this rank's index does not yet hold
     * them all; once {@code caughtUp}, missing pages mean the ranks diverged, which throws.
     */
    @Override
    public synchronized boolean adoptCachedPrefix(String rid, String nodeName, String graphWalk, List<Integer> pages,
                                                  boolean caughtUp) {
        return leases.adopt(rid, nodeName, graphWalk, pages, caughtUp);
    }

    /** Give back the walk's leases, for a step that will not run. */
    @Override
    public synchronized void releaseCachedPrefix(String rid, String nodeName, String graphWalk) {
        leases.release(rid, nodeName, graphWalk);
    }

    /** Key pages that this step's sampled tokens fill, for labels the request decodes into a keyed chain. */
    @Override
    public synchronized void extendPrefixChain(String rid, String nodeName, String graphWalk,
                                               Map<String, int[]> outputs) {
        leases.extendChains(rid, nodeName, graphWalk, outputs);
    }

    // ---------------------------------------------------------------- eviction

    /** Offload only with a host pool ({@code cpu_offload_pages} > 0). */
    @Override
    public <C> Optional<C> capability(Class<C> type) {
        return type == Offload.class && offload == null ? Optional.empty() : Resource.super.capability(type);
    }

    /** True from the moment offload claims the request until reload brings it back. */
    @Override
    public synchronized boolean isOffloaded(String rid) {
        RequestState r = st.request(rid);
        return r != null && r.anyOffloaded();
    }

    /** Move the request's non-empty streams to host memory; 0 while any stream is in flight or reading. */
    @Override
    public synchronized int offload(String rid) {
        RequestState r = st.request(rid);
        return offload == null || r == null ? 0 : offload.offload(r);
    }

    /** Bring an offloaded request back; false, with nothing changed, when it does not fit after eviction. */
    @Override
    public synchronized boolean reload(String rid) {
        RequestState r = st.request(rid);
        return offload == null || r == null || !r.anyOffloaded() || offload.reload(r);
    }

    @Override
    public synchronized boolean canReload(String rid) {
        RequestState r = st.request(rid);
        return offload == null || r == null || offload.reloadNeed(r) <= st.arena.freeCount() + st.evictable();
    }

    /** Device pages offload would let go of: those of non-empty streams; 0 once offloaded or in flight. */
    @Override
    public synchronized int reclaimable(String rid) {
        RequestState r = st.request(rid);
        if (offload == null || r == null || r.anyOffloaded() || r.anyInFlight()) {
            return 0;
        }
        return r.streams.values().stream().filter(s -> s.storedLen > 0).mapToInt(s -> s.pages.size()).sum();
    }

    // ---------------------------------------------------------------- publish / retrieve

    @Override
    public Class<PublishedKVInfo> publishedType() {
        return PublishedKVInfo.class;
    }

    /**
     * Bring in the streams another cache published for this (node, walk)'s labels. Monotonic: never
     * lowers a length, and an echoed publication is a no-op; a changed producer reset generation
     * resets the stream first. OK-but-not-ready while a read is in flight; a failed read or a
     * world-size mismatch is terminal. Once ready, the pulled pages are offered to the prefix index.
     */
    @Override
    public synchronized AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk,
                                                   PublishedKVInfo pub) {
        if (pub == null) {
            return AdmitOutcome.OK;
        }
        RequestState r = st.request(rid);
        if (r == null) {
            return AdmitOutcome.refused(new AdmitRuntimeError("request '" + rid + "' was never ingested", Set.of(rid)));
        }
        List<String> labels = r.cfg.labels(nodeName, graphWalk);
        AdmitOutcome o = retriever.retrieve(r, labels, pub);
        if (o.ok() && o.ready() && st.prefix != null && st.prefix.keyedWalk(graphWalk)) {
            for (String label : labels) {
                CacheStream s = r.streams.get(label);
                if (s != null && !s.offloaded) {
                    st.prefix.indexRetrieved(s);
                }
            }
        }
        return o;
    }

    /** Every stream of the request. */
    @Override
    public synchronized PublishedKVInfo publish(String rid) {
        RequestState r = st.request(rid);
        return r == null ? null : retriever.publish(r, new ArrayList<>(r.streams.keySet()));
    }

    @Override
    public synchronized PublishedKVInfo publishForStep(String rid, String nodeName, String graphWalk) {
        return publishSelected(rid, nodeName, graphWalk, false);
    }

    @Override
    public synchronized PublishedKVInfo publishAfterStop(String rid, String nodeName, String graphWalk) {
        return publishSelected(rid, nodeName, graphWalk, true);
    }

    private PublishedKVInfo publishSelected(String rid, String node, String walk, boolean afterStop) {
        RequestState r = st.request(rid);
        if (r == null) {
            return null;
        }
        List<String> labels = r.cfg.publishLabels(node, walk, new ArrayList<>(r.streams.keySet()), afterStop);
        return labels.isEmpty() ? null : retriever.publish(r, labels);
    }

    private synchronized KvPagePayload exportPages(int[] pages, int startToken, int endToken) {
        return retriever.export(pages, startToken, endToken);
    }

    private synchronized void gatherPages(int[] pages, ByteBuffer dst) {
        st.pool.gather(pages, dst);
    }

    /** This cache's publications as bytes with their pages' contents, and back into ones this cache retrieves. */
    public PublishedKVCodec codec() {
        return codec;
    }

    /**
     * A codec that lends this cache's published pages through {@code shelf} rather than copying them into the bytes
     * (a hand-off to a cache of this process), and decodes both lent and carried publications.
     */
    public PublishedInfoCodec<PublishedKVInfo> lendingCodec(KvShelf shelf) {
        return new LendingKVCodec(this, shelf, codec);
    }

    /**
     * A codec that offers this cache's publications, pages included, on {@code server} and writes only a ticket (a
     * hand-off to a cache in another process, which pulls them over TCP), and decodes such tickets as well as what
     * {@code other} decodes.
     */
    public PublishedInfoCodec<PublishedKVInfo> networkCodec(KvBytesServer server,
                                                            PublishedInfoCodec<PublishedKVInfo> other) {
        return new NetworkKVCodec(server, codec, other);
    }

    /** Lends the pages of {@code streams} (one owner more each) under a new ticket of {@code shelf}. */
    synchronized long lend(Map<String, KVSequenceInfo> streams, KvShelf shelf) {
        if (closed) {
            throw new IllegalStateException("a closed KV cache lends nothing");
        }
        Map<String, int[]> pages = new LinkedHashMap<>();
        streams.forEach((label, seq) -> {
            int[] p = seq.pageIndices();
            for (int page : p) {
                st.arena.retain(page);
            }
            pages.put(label, p);
        });
        long ticket = shelf.register(this);
        st.lent.put(ticket, new KVState.Lend(shelf, pages));
        return ticket;
    }

    /** Marks {@code ticket} claimed, so it is no longer taken back; false when it is not lent (any more). */
    synchronized boolean claimLend(long ticket) {
        KVState.Lend lend = st.lent.get(ticket);
        if (lend == null || lend.claimed) {
            return false;
        }
        lend.claimed = true;
        return true;
    }

    /**
     * Copies pages {@code [from, to)} of stream {@code label} lent under {@code ticket} onto {@code dstPages} of
     * {@code dst}, on the device; returns the bytes copied.
     *
     * @throws LentPagesGone when this cache closed since
     */
    synchronized long copyLent(long ticket, String label, int from, int to, KvPool dst, int[] dstPages) {
        KVState.Lend lend = st.lent.get(ticket);
        if (closed || lend == null) {
            throw new LentPagesGone("ticket " + ticket + " is no longer lent: its KV cache closed");
        }
        int[] src = Arrays.copyOfRange(lend.pages.get(label), from, to);
        st.pool.copyPagesTo(src, dst, dstPages);
        return (long) src.length * st.pool.pageBytes();
    }

    /** Takes back the pages lent under {@code ticket}; a no-op when they are back already. */
    synchronized void returnLend(long ticket) {
        KVState.Lend lend = st.lent.remove(ticket);
        if (lend != null) {
            lend.shelf.forget(ticket);
            if (!closed) {
                st.releaseLend(lend);
            }
        }
    }

    /** Hand-offs whose pages this cache lent and has not got back. */
    public synchronized int lentHandoffs() {
        return st.lent.size();
    }

    /** Page bytes retrievals brought into this cache so far, through the host. */
    public synchronized long retrievedBytes() {
        return retriever.retrievedBytes();
    }

    /** Page bytes retrievals copied on the device from pages another cache lent ({@link KvShelf}) so far. */
    public synchronized long lentBytesCopied() {
        return retriever.lentBytesCopied();
    }

    /**
     * Leading tokens of {@code rid}'s retrieved streams that this cache's prefix index served instead of a read:
     * the least over its streams; 0 when none was retrieved.
     */
    public synchronized int retrievedFromPrefixCache(String rid) {
        RequestState r = st.request(rid);
        return r == null ? 0 : r.streams.values().stream().filter(s -> s.remoteResetGeneration >= 0)
                .mapToInt(s -> s.retrievedLocally).min().orElse(0);
    }

    // ---------------------------------------------------------------- checks

    /** (pages handed out, hash of their order), for a TP follower to compare with rank 0's. */
    @Override
    public synchronized long[] pageTrail() {
        return st.arena.trail();
    }

    /** After capture: pages conserved, nothing in flight or staged (capture rows were reset with free). */
    public synchronized void postWarmupValidate() {
        assertPagesConserved();
        if (staged != null || st.requests.values().stream().anyMatch(RequestState::anyInFlight)) {
            throw new IllegalStateException("KV state left in flight after warmup");
        }
    }

    /**
     * Check the arena against every stream, lease, index entry and host page (see
     * {@link PageConservation}); throws {@link IllegalStateException} listing every violation.
     */
    public synchronized void assertPagesConserved() {
        PageConservation.check(st, offload == null ? null : offload.pool());
    }

    /** Pages free right now (pages held only by the prefix index count as used: they are evicted on demand). */
    public synchronized int freePages() {
        return st.arena.freeCount();
    }

    /** Pages an admission can take now: the free ones and those held only by the prefix index. */
    public synchronized int availablePages() {
        return st.arena.freeCount() + st.evictable();
    }

    @Override
    public synchronized void cleanup() {
        closed = true;
        st.lent.forEach((ticket, lend) -> lend.shelf.forget(ticket));
        st.lent.clear();
        activate(null, null);
        leasedWrites.close();
        st.pool.tensor().close();
    }

    /** Internal state, for tests in this package. */
    KVState state() {
        return st;
    }
}
