package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.keyed;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Fork;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.KVStep;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/**
 * Random sequences of ingest, prefill (through the prefix cache), decode steps with forks, retention,
 * sink rows and non-committing steps, abandoned steps, offload, reload, retrieve into a second cache,
 * hand-driven retention, resets and removals. After every operation: pages conserved in both caches,
 * every resident stream reads back what was written, and each operation's own contract (no trace of a
 * refusal, no extra pages on a retried admit, commit arithmetic, plan layout, retention window,
 * monotonic retrieve, exact offload/reload round trip, probe one key short, shortfall net of eviction).
 */
class KVManagerPropertiesTest {
    private static final int PS = 4;
    private static final String[] RIDS = {"r0", "r1", "r2", "r3"};
    private static final int[][] BASES = {KvHarness.range(1, 24), concat(KvHarness.range(1, 8), KvHarness.range(100, 16)),
            KvHarness.range(200, 24)};
    private static final RetentionPolicy WINDOW = new RetentionPolicy(8, 4);

    record Op(int kind, int a, int b, int c) {}

    @Provide
    Arbitrary<List<Op>> ops() {
        Arbitrary<Integer> small = Arbitraries.integers().between(0, 99);
        return Combinators.combine(Arbitraries.integers().between(0, 15), small, small, small).as(Op::new)
                .list().ofMinSize(5).ofMaxSize(50);
    }

    @Property(tries = 100)
    void randomOperationsKeepEveryInvariant(@ForAll("ops") List<Op> ops) {
        new World(false, KVCacheDType.AUTO).run(ops);
    }

    /** The same operations over latent (MLA) pages: one row per token, through the same arena, index and offload. */
    @Property(tries = 50)
    void randomOperationsOnLatentPagesKeepEveryInvariant(@ForAll("ops") List<Op> ops) {
        new World(true, KVCacheDType.AUTO).run(ops);
    }

    /**
     * The same operations over FP8 (E4M3) pages: pages move as bytes, so every move (fork, offload, reload, retrieve)
     * keeps the codes written, and each stream reads back its values' nearest codes.
     */
    @Property(tries = 50)
    void randomOperationsOnFp8PagesKeepEveryInvariant(@ForAll("ops") List<Op> ops) {
        new World(false, KVCacheDType.FP8_E4M3).run(ops);
    }

    private static int[] concat(int[] a, int[] b) {
        int[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    /** A producer cache (with host offload and a prefix cache) and a consumer that retrieves from it. */
    private static final class World {
        final InProcessKvTransport.Hub hub = new InProcessKvTransport.Hub();
        final KvHarness p;
        final KvHarness c;
        final Map<String, int[]> prompts = new HashMap<>();
        final Set<String> prefilled = new TreeSet<>();
        final Map<String, long[]> offloadedLengths = new HashMap<>();
        /** Producer reset generation the consumer last retrieved, per rid. */
        final Map<String, Long> retrievedEpoch = new HashMap<>();
        int nextId = 10_000;

        World(boolean latent, KVCacheDType dtype) {
            p = new KvHarness(config(latent, 14).cpuOffloadPages(10).cacheDType(dtype).build(),
                    new InProcessKvTransport(hub, "producer"));
            c = new KvHarness(config(latent, 20).cacheDType(dtype).build(), new InProcessKvTransport(hub, "consumer"));
            byte[] root = {4, 2};
            assertThat(p.kv.enablePrefixCache(root, Set.of(PREFILL, DECODE))).isTrue();
            assertThat(c.kv.enablePrefixCache(root, Set.of(PREFILL, DECODE))).isTrue();
        }

        void run(List<Op> ops) {
            for (Op op : ops) {
                String rid = RIDS[op.a() % RIDS.length];
                switch (op.kind()) {
                    case 0 -> ingest(rid, op);
                    case 1, 2, 3 -> prefill(rid, op);
                    case 4, 5, 6, 7 -> decode(op, false);
                    case 8 -> decode(op, true);
                    case 9 -> {
                        offload(rid);
                        if (op.c() % 2 == 0) {
                            reload(rid);
                        }
                    }
                    case 10 -> reload(rid);
                    case 11 -> remove(rid);
                    case 12 -> retrieve(rid);
                    case 13 -> reset(rid, op.c() % 2 == 0);
                    case 14 -> releaseOldest(rid, op.c() % 3);
                    case 15 -> retrieve(RIDS[(op.a() + 1) % RIDS.length]);
                    default -> throw new IllegalStateException();
                }
                p.kv.assertPagesConserved();
                c.kv.assertPagesConserved();
                p.verifyAll();
                c.verifyAll();
            }
        }

        private static PagedKVConfig.Builder config(boolean latent, int pages) {
            return latent ? KvHarness.latentConfig(pages, PS) : KvHarness.config(pages, PS);
        }

        boolean live(String rid) {
            return p.st().request(rid) != null;
        }

        boolean resident(String rid) {
            return live(rid) && !p.kv.isOffloaded(rid);
        }

        void ingest(String rid, Op op) {
            if (live(rid)) {
                int stored = p.stream(rid, "main").storedLen;
                p.kv.ingestRequest(rid, null);
                assertThat(p.stream(rid, "main").storedLen).isEqualTo(stored);
                return;
            }
            int[] prompt = Arrays.copyOf(BASES[op.b() % BASES.length], 5 + op.c() % 18);
            prompts.put(rid, prompt);
            p.kv.ingestRequest(rid, op.b() % 4 == 3 ? null : keyed(prompt, PS));
        }

        void prefill(String rid, Op op) {
            if (!live(rid)) {
                ingest(rid, op);
            }
            if (!resident(rid) || prefilled.contains(rid)) {
                return;
            }
            int[] prompt = prompts.get(rid);
            CachedPrefix cached = p.kv.resolveCachedPrefix(rid, NODE, PREFILL, Map.of());
            CacheStream s = p.stream(rid, "main");
            if (cached != null) {
                assertThat(s.lease.size()).isLessThanOrEqualTo(s.chain.totalKeys() - 1);
                assertThat(cached.tokens()).isEqualTo(s.lease.size() * PS);
            }
            p.kv.applyCachedPrefix(rid, NODE, PREFILL, Map.of(), cached);
            int skip = cached == null ? 0 : cached.tokens();
            KVStep step = KVStep.builder().segments(List.of(new Segment(rid, "main", prompt.length - skip))).build();
            StepContext ctx = KvHarness.ctx(List.of(rid), PREFILL);
            if (!admit(step, ctx)) {
                p.kv.releaseCachedPrefix(rid, NODE, PREFILL);
                return;
            }
            List<int[]> held = new ArrayList<>();
            for (int i = 0; i < skip; i++) {
                held.add(new int[] {prompt[i], i});
            }
            p.oracle.put(new StreamLabel(rid, "main"), held);
            commitChecked(step, ctx, Map.of(new StreamLabel(rid, "main"), Arrays.copyOfRange(prompt, skip, prompt.length)));
            prefilled.add(rid);
        }

        /** Admit, checking a refusal left no trace and a retry took nothing more. */
        boolean admit(KVStep step, StepContext ctx) {
            Snapshot before = new Snapshot(p);
            int evictable = p.st().evictable();
            AdmitOutcome o = p.kv.admit(step, ctx);
            if (!o.ok()) {
                assertThat(new Snapshot(p)).as("refused admit leaves no trace").isEqualTo(before);
                p.kv.rollbackAdmit(step, ctx);
                assertThat(new Snapshot(p)).isEqualTo(before);
                if (o.reason() instanceof AllocationFailed f) {
                    assertThat(f.pagesShort()).isPositive();
                    if (step.segments().size() == 1 && step.postForks().isEmpty() && step.preForks().isEmpty()) {
                        Segment seg = step.segments().get(0);
                        CacheStream s = p.stream(seg.requestId(), seg.label());
                        int have = s == null ? 0 : s.pages.size() + (s.lease == null ? 0 : s.lease.size());
                        int stored = s == null ? 0 : (s.lease != null && s.storedLen == 0 ? s.lease.size() * PS : s.storedLen);
                        int need = p.st().pagesFor(stored + seg.span()) - have;
                        assertThat(f.pagesShort()).as("short net of what eviction could free")
                                .isEqualTo(need - before.free - evictable);
                    }
                }
                return false;
            }
            Snapshot admitted = new Snapshot(p);
            assertThat(p.kv.admit(step, ctx).ok()).isTrue();
            assertThat(new Snapshot(p)).as("retried admit takes nothing more").isEqualTo(admitted);
            for (Segment seg : step.segments()) {
                if (!ctx.isPaddingRow(seg.requestId())) {
                    assertThat(p.kv.offload(seg.requestId())).isZero();
                }
            }
            return true;
        }

        void commitChecked(KVStep step, StepContext ctx, Map<StreamLabel, int[]> ids) {
            Map<StreamLabel, Integer> positionBefore = new HashMap<>();
            for (Segment seg : step.segments()) {
                CacheStream s = p.stream(seg.requestId(), seg.label());
                if (s != null) {
                    positionBefore.put(new StreamLabel(seg.requestId(), seg.label()), s.position());
                }
            }
            Set<StreamLabel> forkTargets = new HashSet<>();
            for (Fork f : step.preForks()) {
                step.segments().forEach(seg -> forkTargets.add(new StreamLabel(seg.requestId(), f.to())));
            }
            for (Fork f : step.postForks()) {
                step.segments().forEach(seg -> forkTargets.add(new StreamLabel(seg.requestId(), f.to())));
            }
            KVPlanOutputs out = p.planWriteCommit(step, ctx, ids);
            checkPlan(out);
            for (Segment seg : step.segments()) {
                StreamLabel key = new StreamLabel(seg.requestId(), seg.label());
                CacheStream s = p.stream(seg.requestId(), seg.label());
                boolean sink = StepRows.isSink(step, ctx, seg);
                if (sink || forkTargets.contains(key)) {
                    continue;
                }
                int grew = step.commit() ? seg.span() : 0;
                assertThat(s.position()).as("commit arithmetic of %s", key)
                        .isEqualTo(positionBefore.getOrDefault(key, 0) + grew);
                assertThat(s.stepInFlight).isFalse();
                if (s.retention != null) {
                    int first = p.st().pagesFor(s.protectedPrefix);
                    assertThat(s.storedLen - s.protectedPrefix - s.retention.contextBudget() < PS
                            || s.storedLen / PS - first <= 0).as("retention window of %s", key).isTrue();
                }
            }
        }

        void checkPlan(KVPlanOutputs out) {
            for (KVPlanOutput o : out.byLabel().values()) {
                PagedIndptrs ip = o.indptrs();
                int t = 0;
                List<Integer> indices = new ArrayList<>();
                for (int i = 0; i < o.views().size(); i++) {
                    SequenceView v = o.views().get(i);
                    assertThat(ip.qoIndptr()[i + 1] - ip.qoIndptr()[i]).isEqualTo(v.toCompute());
                    assertThat(ip.kvIndptr()[i + 1] - ip.kvIndptr()[i]).isEqualTo((v.length() + PS - 1) / PS);
                    assertThat(ip.lastPageLen()[i]).isBetween(1, PS);
                    for (int pg : v.pageIdxs()) {
                        indices.add(pg);
                    }
                    for (int pos = v.length() - v.toCompute(); pos < v.length(); pos++, t++) {
                        int page = v.sink() ? PageArena.SINK_PAGE : v.pageIdxs()[pos / PS];
                        assertThat(o.writePages()[t]).isEqualTo(page);
                        assertThat(o.writeOffsets()[t]).isEqualTo(pos % PS);
                    }
                }
                assertThat(ip.kvIndices()).containsExactly(indices.stream().mapToInt(Integer::intValue).toArray());
                assertThat(t).isEqualTo(o.writePages().length);
            }
        }

        void decode(Op op, boolean abandon) {
            List<String> rows = new ArrayList<>();
            for (int i = 0; i < RIDS.length; i++) {
                boolean offloadedToo = op.c() % 17 == 0;
                if ((op.b() >> i & 1) == 1 && prefilled.contains(RIDS[i]) && (offloadedToo || resident(RIDS[i]))) {
                    rows.add(RIDS[i]);
                }
            }
            if (rows.isEmpty()) {
                prefilled.stream().filter(this::resident).forEach(rows::add);
            }
            if (rows.isEmpty()) {
                return;
            }
            String label = op.c() % 3 == 0 ? "aux" : "main";
            int span = 1 + op.c() % 3;
            boolean commit = op.c() % 5 != 0;
            KVStep.Builder b = KVStep.builder().commit(commit);
            List<Segment> segs = new ArrayList<>();
            Map<StreamLabel, int[]> ids = new LinkedHashMap<>();
            Map<StreamLabel, RetentionPolicy> retention = new HashMap<>();
            for (String rid : rows) {
                segs.add(new Segment(rid, label, span));
                int[] toks = KvHarness.range(nextId, span);
                nextId += span;
                ids.put(new StreamLabel(rid, label), toks);
                if (label.equals("main") && op.c() % 5 == 1) {
                    retention.put(new StreamLabel(rid, label), WINDOW);
                }
            }
            StepContext ctx = KvHarness.ctx(rows, DECODE);
            if (op.c() % 4 == 2) {
                segs.add(new Segment("-9", label, span));
                List<String> padded = new ArrayList<>(rows);
                padded.add("-9");
                ctx.setPaddedRequestIds(padded);
            }
            if (label.equals("main") && op.c() % 11 == 1) {
                b.postForks(List.of(new Fork("main", "aux")));
            } else if (label.equals("main") && op.c() % 13 == 4) {
                b.preForks(List.of(new Fork("main", "aux")));
            }
            KVStep step = b.segments(segs).retention(retention).build();
            if (abandon) {
                Snapshot before = new Snapshot(p);
                if (p.kv.admit(step, ctx).ok()) {
                    p.kv.rollbackAdmit(step, ctx);
                }
                // Everything it took comes back; pages the index evicted to make room stay free.
                Snapshot after = new Snapshot(p);
                assertThat(after.streams).as("an abandoned step gives back what it took").isEqualTo(before.streams);
                assertThat(after.free - before.free).isEqualTo(before.indexSize - after.indexSize);
                return;
            }
            if (!admit(step, ctx)) {
                return;
            }
            if (commit && label.equals("main")) {
                ids.forEach((key, toks) -> p.kv.extendPrefixChain(key.requestId(), NODE, DECODE, Map.of("ids", toks)));
            }
            commitChecked(step, ctx, ids);
        }

        void offload(String rid) {
            if (!live(rid)) {
                return;
            }
            boolean was = p.kv.isOffloaded(rid);
            long[] lengths = lengths(rid);
            int freed = p.kv.offload(rid);
            if (was) {
                assertThat(freed).isZero();
            } else if (freed > 0) {
                assertThat(p.kv.isOffloaded(rid)).isTrue();
                assertThat(p.kv.reclaimable(rid)).isZero();
                offloadedLengths.put(rid, lengths);
            }
        }

        void reload(String chosen) {
            String rid = live(chosen) && p.kv.isOffloaded(chosen) ? chosen
                    : Arrays.stream(RIDS).filter(r -> live(r) && p.kv.isOffloaded(r)).findFirst().orElse(null);
            if (rid == null) {
                return;
            }
            Snapshot before = new Snapshot(p);
            boolean fits = p.kv.canReload(rid);
            boolean ok = p.kv.reload(rid);
            assertThat(ok).isEqualTo(fits);
            if (!ok) {
                assertThat(new Snapshot(p)).isEqualTo(before);
                assertThat(p.kv.isOffloaded(rid)).isTrue();
                return;
            }
            assertThat(lengths(rid)).containsExactly(offloadedLengths.remove(rid));
        }

        long[] lengths(String rid) {
            List<Long> out = new ArrayList<>();
            for (CacheStream s : p.st().request(rid).streams.values()) {
                out.add((long) s.storedLen);
                out.add((long) s.released);
                out.add(s.protectedPrefix == null ? -1L : s.protectedPrefix);
            }
            return out.stream().mapToLong(Long::longValue).toArray();
        }

        void remove(String rid) {
            p.kv.removeRequest(rid);
            c.kv.removeRequest(rid);
            prefilled.remove(rid);
            offloadedLengths.remove(rid);
            retrievedEpoch.remove(rid);
            p.oracle.keySet().removeIf(k -> k.requestId().equals(rid));
            c.oracle.keySet().removeIf(k -> k.requestId().equals(rid));
        }

        void retrieve(String rid) {
            if (!resident(rid) || p.stream(rid, "main").released > 0) {
                return;
            }
            PublishedKVInfo pub = (PublishedKVInfo) p.kv.publish(rid);
            c.kv.ingestRequest(rid, null);
            CacheStream mine = c.stream(rid, "main");
            int before = mine.storedLen;
            long epoch = pub.forRank(0).get("main").resetGeneration();
            AdmitOutcome o = c.kv.admitRetrieve(rid, NODE, DECODE, pub);
            if (!o.ok()) {
                assertThat(o.reason()).isInstanceOf(AllocationFailed.class);
                return;
            }
            assertThat(o.ready()).isTrue();
            boolean rewound = retrievedEpoch.containsKey(rid) && retrievedEpoch.get(rid) != epoch;
            if (!rewound) {
                assertThat(mine.storedLen).as("retrieve never lowers a length").isGreaterThanOrEqualTo(before);
            }
            if (rewound || pub.forRank(0).get("main").seqLen() >= before) {
                c.oracle.put(new StreamLabel(rid, "main"), new ArrayList<>(p.oracle.getOrDefault(
                        new StreamLabel(rid, "main"), List.of())));
            }
            retrievedEpoch.put(rid, epoch);
        }

        void reset(String rid, boolean free) {
            if (!live(rid)) {
                return;
            }
            p.kv.resetRequest(rid, free);
            prefilled.remove(rid);
            offloadedLengths.remove(rid);
            p.oracle.keySet().removeIf(k -> k.requestId().equals(rid));
        }

        void releaseOldest(String rid, int pages) {
            if (!resident(rid)) {
                return;
            }
            CacheStream s = p.stream(rid, "main");
            if (s.protectedPrefix == null && s.released == 0) {
                p.kv.protectPrefix(rid, "main", 4);
            }
            if (s.protectedPrefix == null) {
                return;
            }
            int k = p.kv.releaseOldest(rid, "main", pages);
            if (k > 0) {
                int first = p.st().pagesFor(s.protectedPrefix) * PS;
                p.oracle.get(new StreamLabel(rid, "main")).subList(first, first + k * PS).clear();
            }
        }
    }

    /** What a refused or abandoned step must leave exactly as it was. */
    private static final class Snapshot {
        final int free;
        final int indexSize;
        final Map<String, String> streams = new HashMap<>();

        Snapshot(KvHarness h) {
            KVState st = h.st();
            free = st.arena.freeCount();
            indexSize = st.prefix == null ? 0 : st.prefix.index().size();
            for (RequestState r : st.requests.values()) {
                for (CacheStream s : r.streams.values()) {
                    streams.put(r.requestId + "/" + s.label, s.storedLen + " " + s.pages + " " + s.lease + " "
                            + s.stepInFlight + " " + s.offloaded);
                }
            }
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Snapshot s && free == s.free && indexSize == s.indexSize
                    && streams.equals(s.streams);
        }

        @Override
        public int hashCode() {
            return free;
        }

        @Override
        public String toString() {
            return "free=" + free + " index=" + indexSize + " " + new TreeMap<>(streams);
        }
    }
}
