package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Float8E4m3;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cpu.CpuTensor;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Fork;
import org.mstar.resources.KVLayout;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.KVStep;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/**
 * A KV manager on the CPU device driven like a model would drive it, with an oracle of what every
 * stream must hold. K and V of a token are a fixed function of (token id, absolute position, layer),
 * so two requests with the same prefix write the same bytes, as a real model would. Over latent (MLA) pages a
 * token's row is what K would be, written raw at the planned addresses.
 */
final class KvHarness {
    static final int LAYERS = 2;
    static final int HEADS = 2;
    static final int HEAD_DIM = 4;
    static final int TOKEN_ELEMS = HEADS * HEAD_DIM;
    /** The rope part of a latent row of {@link #TOKEN_ELEMS} values. */
    static final int LATENT_ROPE = 2;
    static final String NODE = "llm";
    static final String PREFILL = "prefill";
    static final String DECODE = "decode";

    final CpuDevice device = new CpuDevice(1);
    final KVManager kv;
    final int pageSize;
    /** Per stream: (token id, absolute position) of every token it must hold, in page order. */
    final Map<StreamLabel, List<int[]>> oracle = new HashMap<>();

    KvHarness(PagedKVConfig config, KvTransport transport) {
        this.kv = new KVManager(config, device, DType.F32, 1, 0, transport);
        this.pageSize = config.pageSize();
    }

    KvHarness(int pages, int pageSize) {
        this(config(pages, pageSize).build(), null);
    }

    static PagedKVConfig.Builder config(int pages, int pageSize) {
        return PagedKVConfig.builder(LAYERS, HEADS, HEAD_DIM, 1 << 16).maxNumPages(pages).pageSize(pageSize);
    }

    /** Latent pages whose rows are as wide as an NHD token's K ({@link #TOKEN_ELEMS}). */
    static PagedKVConfig.Builder latentConfig(int pages, int pageSize) {
        return PagedKVConfig.builder(LAYERS, 1, HEAD_DIM, 1 << 16).numQoHeads(HEADS).layout(KVLayout.MLA)
                .kvLoraRank(TOKEN_ELEMS - LATENT_ROPE).qkRopeHeadDim(LATENT_ROPE).maxNumPages(pages).pageSize(pageSize);
    }

    /** Whether the pool holds latent rows (one plane) rather than K and V. */
    static boolean latent(KVManager m) {
        return m.pool().dim(2) == 1;
    }

    KVState st() {
        return kv.state();
    }

    CacheStream stream(String rid, String label) {
        return st().stream(rid, label);
    }

    int free() {
        return st().arena.freeCount();
    }

    static StepContext ctx(List<String> rids, String walk) {
        return new StepContext(rids, walk, 0, false);
    }

    /** K (kv=0) or V (kv=1) element {@code e} of a token: exact in fp32, different for every input. */
    static float value(int id, int pos, int layer, int kv, int e) {
        long h = id * 0x9E3779B97F4A7C15L + pos * 0xC2B2AE3D27D4EB4FL + layer * 0x165667B19E3779F9L
                + kv * 0x27D4EB2F165667C5L + e * 0x94D049BB133111EBL;
        h = (h ^ (h >>> 30)) * 0xBF58476D1CE4E5B9L;
        h = (h ^ (h >>> 27)) * 0x94D049BB133111EBL;
        h ^= h >>> 31;
        return ((h >>> 40) - (1L << 23)) / (float) (1 << 23);
    }

    /** Admit, plan, write every layer's K/V and commit; {@code ids} gives each non-sink segment's new token ids. */
    KVPlanOutputs run(KVStep step, StepContext ctx, Map<StreamLabel, int[]> ids) {
        AdmitOutcome o = kv.admit(step, ctx);
        assertThat(o.ok()).as("admit: %s", o.reason()).isTrue();
        return planWriteCommit(step, ctx, ids);
    }

    KVPlanOutputs planWriteCommit(KVStep step, StepContext ctx, Map<StreamLabel, int[]> ids) {
        KVPlanOutputs out = kv.plan(step, ctx);
        for (Fork f : step.preForks()) {
            for (String rid : out.forkRids()) {
                copyOracle(rid, f);
            }
        }
        Map<StreamLabel, List<int[]>> written = new HashMap<>();
        for (KVPlanOutput p : out.byLabel().values()) {
            writeLabel(p, ids, written);
        }
        Map<StreamLabel, Integer> releasedBefore = new HashMap<>();
        for (StreamLabel key : written.keySet()) {
            CacheStream s = stream(key.requestId(), key.label());
            releasedBefore.put(key, s.released);
        }
        kv.commit(step, ctx);
        if (step.commit()) {
            written.forEach((key, toks) -> {
                List<int[]> list = oracle.computeIfAbsent(key, k -> new ArrayList<>());
                list.addAll(toks);
                CacheStream s = stream(key.requestId(), key.label());
                int gone = s.released - releasedBefore.get(key);
                if (gone > 0) {
                    int first = st().pagesFor(s.protectedPrefix == null ? 0 : s.protectedPrefix) * pageSize;
                    list.subList(first, first + gone).clear();
                }
            });
        }
        for (Fork f : step.postForks()) {
            for (String rid : out.forkRids()) {
                copyOracle(rid, f);
            }
        }
        return out;
    }

    private void copyOracle(String rid, Fork f) {
        List<int[]> src = oracle.get(new StreamLabel(rid, f.from()));
        if (stream(rid, f.from()) != null) {
            oracle.put(new StreamLabel(rid, f.to()), src == null ? new ArrayList<>() : new ArrayList<>(src));
        }
    }

    private void writeLabel(KVPlanOutput p, Map<StreamLabel, int[]> ids, Map<StreamLabel, List<int[]>> written) {
        int n = p.writePages().length;
        float[][] k = new float[LAYERS][n * TOKEN_ELEMS];
        float[][] v = new float[LAYERS][n * TOKEN_ELEMS];
        int t = 0;
        for (SequenceView view : p.views()) {
            StreamLabel key = new StreamLabel(view.requestId(), view.label());
            CacheStream s = view.sink() ? null : stream(view.requestId(), view.label());
            int[] tokIds = ids.get(key);
            for (int i = 0; i < view.toCompute(); i++, t++) {
                int id = tokIds == null ? 7 : tokIds[i];
                int pos = (s == null ? 0 : s.released) + view.length() - view.toCompute() + i;
                for (int l = 0; l < LAYERS; l++) {
                    for (int e = 0; e < TOKEN_ELEMS; e++) {
                        k[l][t * TOKEN_ELEMS + e] = value(id, pos, l, 0, e);
                        v[l][t * TOKEN_ELEMS + e] = value(id, pos, l, 1, e);
                    }
                }
                if (!view.sink()) {
                    written.computeIfAbsent(key, x -> new ArrayList<>()).add(new int[] {id, pos});
                }
            }
        }
        for (int l = 0; l < LAYERS; l++) {
            if (latent(kv)) {
                float[] rows = k[l];
                kv.writeKv(l, p.planLabel(), n, (pool, layer, pages, offsets) -> writeRows(pool, layer, pages, offsets,
                        rows));
                continue;
            }
            try (Tensor kt = device.fromFloats(k[l], DType.F32, n, HEADS, HEAD_DIM);
                 Tensor vt = device.fromFloats(v[l], DType.F32, n, HEADS, HEAD_DIM)) {
                kv.writeKv(kt, vt, l, p.planLabel());
            }
        }
    }

    /** Token i's row of {@code rows} into {@code pool[layer, pages[i], 0, offsets[i]]}, as a latent append would. */
    private static void writeRows(Tensor pool, int layer, Tensor pages, Tensor offsets, float[] rows) {
        CpuTensor p = CpuTensor.of(pool);
        CpuTensor pg = CpuTensor.of(pages);
        CpuTensor off = CpuTensor.of(offsets);
        long pageSize = p.dim(3);
        for (int i = 0; i < pg.size(); i++) {
            long slot = ((layer * p.dim(1) + pg.getInt(i)) * pageSize + off.getInt(i)) * TOKEN_ELEMS;
            for (int e = 0; e < TOKEN_ELEMS; e++) {
                p.setFloat((int) slot + e, rows[i * TOKEN_ELEMS + e]);
            }
        }
    }

    /** One committing step of {@code span} new tokens (ids from {@code firstId} on) on each (rid, label). */
    KVPlanOutputs extend(String label, int firstId, Map<String, Integer> spans) {
        List<Segment> segs = new ArrayList<>();
        Map<StreamLabel, int[]> ids = new HashMap<>();
        spans.forEach((rid, span) -> {
            segs.add(new Segment(rid, label, span));
            ids.put(new StreamLabel(rid, label), range(firstId, span));
        });
        return run(KVStep.builder().segments(segs).build(), ctx(List.copyOf(spans.keySet()), PREFILL), ids);
    }

    static int[] range(int first, int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
            a[i] = first + i;
        }
        return a;
    }

    /** A request config keying "main" with the pages of {@code prompt} (a partial last page gets its key too). */
    static KVReqConfig keyed(int[] prompt, int pageSize) {
        List<byte[]> keys = new ArrayList<>(PrefixKeys.chain(prompt, pageSize));
        int whole = keys.size() * pageSize;
        int[] tail = Arrays.copyOfRange(prompt, whole, prompt.length);
        if (tail.length > 0) {
            keys.add(PrefixKeys.pageKey(keys.isEmpty() ? PrefixKeys.NO_PREV : keys.get(keys.size() - 1), tail, List.of()));
        }
        return new KVReqConfig(null, null, null, null, null, Map.of("main", keys), Map.of("main", tail),
                Map.of("main", "ids"), true, null, null);
    }

    /**
     * Run a prompt as the engine would: probe the prefix cache, apply the agreed prefix, and prefill the
     * rest on "main". Returns the cached prefix length in tokens.
     */
    int prefill(String rid, int[] prompt) {
        CachedPrefix cached = kv.resolveCachedPrefix(rid, NODE, PREFILL, Map.of());
        kv.applyCachedPrefix(rid, NODE, PREFILL, Map.of(), cached);
        int skip = cached == null ? 0 : cached.tokens();
        StreamLabel key = new StreamLabel(rid, "main");
        List<int[]> held = new ArrayList<>();
        for (int i = 0; i < skip; i++) {
            held.add(new int[] {prompt[i], i});
        }
        oracle.put(key, held);
        KVStep step = KVStep.builder().segments(List.of(new Segment(rid, "main", prompt.length - skip))).build();
        run(step, ctx(List.of(rid), PREFILL), Map.of(key, Arrays.copyOfRange(prompt, skip, prompt.length)));
        return skip;
    }

    /** Open {@code rid} keyed by {@code prompt} and {@link #prefill} it; returns the cached prefix length. */
    int ingestAndPrefill(String rid, int[] prompt) {
        kv.ingestRequest(rid, keyed(prompt, pageSize));
        return prefill(rid, prompt);
    }

    /** The stream's K/V read back through its page table equals what the oracle says it holds. */
    void verify(String rid, String label) {
        verify(kv, rid, label, oracle.getOrDefault(new StreamLabel(rid, label), List.of()));
    }

    static void verify(KVManager m, String rid, String label, List<int[]> expected) {
        assertThat(m.state().stream(rid, label).storedLen).as("stored length of %s/%s", rid, label)
                .isEqualTo(expected.size());
        for (int l = 0; l < LAYERS; l++) {
            float[][] got = m.readKv(rid, label, l);
            float[] wantK = new float[expected.size() * TOKEN_ELEMS];
            float[] wantV = new float[expected.size() * TOKEN_ELEMS];
            for (int t = 0; t < expected.size(); t++) {
                for (int e = 0; e < TOKEN_ELEMS; e++) {
                    wantK[t * TOKEN_ELEMS + e] = stored(m, value(expected.get(t)[0], expected.get(t)[1], l, 0, e));
                    wantV[t * TOKEN_ELEMS + e] = stored(m, value(expected.get(t)[0], expected.get(t)[1], l, 1, e));
                }
            }
            assertThat(got[0]).as("K of %s/%s layer %d", rid, label, l).containsExactly(wantK);
            assertThat(got[1]).as("V of %s/%s layer %d", rid, label, l)
                    .containsExactly(latent(m) ? new float[0] : wantV);
        }
    }

    /** What {@code m}'s pool holds of a written value: the value, or in an FP8 pool its nearest E4M3 code's. */
    static float stored(KVManager m, float v) {
        return m.pool().dtype() == DType.F8_E4M3 ? Float8E4m3.decode(Float8E4m3.encode(v)) : v;
    }

    /** Every live, device-resident stream against the oracle. */
    void verifyAll() {
        for (RequestState r : st().requests.values()) {
            for (CacheStream s : r.streams.values()) {
                if (!s.offloaded && !s.readPending()) {
                    verify(r.requestId, s.label);
                }
            }
        }
    }
}
