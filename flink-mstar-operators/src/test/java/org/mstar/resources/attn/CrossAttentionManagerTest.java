package org.mstar.resources.attn;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.AttnBackend;
import org.mstar.resources.BucketKey;
import org.mstar.resources.CrossAttentionConfig;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.KVStep;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.runner.StepRunner;

/**
 * Cross-attention through the KV manager: an encode step writes each request's context once (Whisper's
 * cross K/V of the encoder output), later steps attend it with zero-span context segments, and the result
 * equals dense attention of every query over its request's whole context. Extending a written context is
 * refused; a padding row attends nothing and changes no real row.
 */
class CrossAttentionManagerTest {
    private static final int LAYERS = 2;
    private static final int KV_HEADS = 2;
    private static final int QO_HEADS = 4;
    private static final int HEAD_DIM = 8;
    private static final int PAGE_SIZE = 4;
    private static final int MAX_SEQ_LEN = 64;
    private static final String CONTEXT = "context";

    private final CpuDevice device = new CpuDevice(2);
    private final Random random = new Random(1500);
    private KVManager kv;
    /** Per request, per layer: the context's K and V rows as written, [token][kvHeads * headDim]. */
    private final Map<String, List<List<float[]>>> contextK = new HashMap<>();
    private final Map<String, List<List<float[]>>> contextV = new HashMap<>();

    @BeforeEach
    void setUp() {
        PagedKVConfig config = PagedKVConfig.builder(LAYERS, KV_HEADS, HEAD_DIM, MAX_SEQ_LEN).numQoHeads(QO_HEADS)
                .pageSize(PAGE_SIZE).maxNumPages(64).build();
        kv = new KVManager(config, device, DType.F32, 1, 0, null);
    }

    @AfterEach
    void closeDevice() {
        device.close();
    }

    private CrossAttentionManager cross(boolean queriesFromKv) {
        return new CrossAttentionManager(new CrossAttentionConfig("kv", queriesFromKv ? "kv" : null, CONTEXT,
                AttnBackend.AUTO, "auto"), HEAD_DIM, MAX_SEQ_LEN, device);
    }

    /**
     * One step: {@code queries} new tokens per request on the query label and {@code context} tokens written
     * into each context (0: attend only). With queries from KV the query label is KV's "main"; otherwise the
     * cross step's own label "dec", which KV never sees.
     */
    private SubmoduleStep step(boolean queriesFromKv, Map<String, int[]> queriesAndContext, List<String> real) {
        List<Segment> kvSegs = new ArrayList<>();
        List<Segment> crossSegs = new ArrayList<>();
        queriesAndContext.forEach((rid, qc) -> {
            Segment query = new Segment(rid, queriesFromKv ? "main" : "dec", qc[0]);
            if (queriesFromKv) {
                kvSegs.add(query);
            }
            crossSegs.add(query);
            if (qc[1] >= 0) {
                kvSegs.add(new Segment(rid, CONTEXT, qc[1]));
                crossSegs.add(new Segment(rid, CONTEXT, qc[1]));
            }
        });
        StepContext ctx = new StepContext(real, "decode", 0, false);
        ctx.setPaddedRequestIds(List.copyOf(queriesAndContext.keySet()));
        return new SubmoduleStep(Map.of("kv", KVStep.builder().segments(kvSegs).build(),
                "cross", new AttentionStep(crossSegs, false, false)), null).setCtx(ctx);
    }

    private static Map<String, int[]> ordered(Object... ridQueriesContext) {
        Map<String, int[]> m = new LinkedHashMap<>();
        for (int i = 0; i < ridQueriesContext.length; i += 3) {
            m.put((String) ridQueriesContext[i], new int[] {(Integer) ridQueriesContext[i + 1],
                    (Integer) ridQueriesContext[i + 2]});
        }
        return m;
    }

    private float[] randoms(int n) {
        return Gaussians.draw(random, n);
    }

    /** Writes this step's context tokens of every layer through KV and remembers them per request. */
    private void writeContexts(Map<String, int[]> step) {
        int width = KV_HEADS * HEAD_DIM;
        int tokens = step.values().stream().mapToInt(qc -> Math.max(0, qc[1])).sum();
        for (int layer = 0; layer < LAYERS; layer++) {
            float[] k = randoms(tokens * width);
            float[] v = randoms(tokens * width);
            int row = 0;
            for (Map.Entry<String, int[]> e : step.entrySet()) {
                for (int t = 0; t < Math.max(0, e.getValue()[1]); t++, row++) {
                    int l = layer;
                    contextK.computeIfAbsent(e.getKey(), r -> perLayer()).get(l).add(slice(k, row * width, width));
                    contextV.computeIfAbsent(e.getKey(), r -> perLayer()).get(l).add(slice(v, row * width, width));
                }
            }
            if (tokens > 0) {
                kv.writeKv(device.fromFloats(k, DType.F32, tokens, KV_HEADS, HEAD_DIM),
                        device.fromFloats(v, DType.F32, tokens, KV_HEADS, HEAD_DIM), layer, CONTEXT);
            }
        }
    }

    private static List<List<float[]>> perLayer() {
        List<List<float[]>> l = new ArrayList<>();
        for (int i = 0; i < LAYERS; i++) {
            l.add(new ArrayList<>());
        }
        return l;
    }

    private static float[] slice(float[] x, int from, int n) {
        float[] s = new float[n];
        System.arraycopy(x, from, s, 0, n);
        return s;
    }

    /** Attends every layer's queries through the manager and checks them against dense attention. */
    private void attendAndCheck(CrossAttentionManager cross, String label, Map<String, int[]> step) {
        List<String> rids = List.copyOf(step.keySet());
        int rows = step.values().stream().mapToInt(qc -> qc[0]).sum();
        for (int layer = 0; layer < LAYERS; layer++) {
            float[] q = randoms(rows * QO_HEADS * HEAD_DIM);
            Tensor out = device.zeros(DType.F32, rows, QO_HEADS, HEAD_DIM);
            cross.run(device.fromFloats(q, DType.F32, rows, QO_HEADS, HEAD_DIM), label, layer, kv.pool(), out);
            float[] actual = device.toFloats(out);

            int[] qSpans = rids.stream().mapToInt(r -> step.get(r)[0]).toArray();
            int[] kvSpans = rids.stream().mapToInt(r -> contextK.containsKey(r) ? contextK.get(r).get(0).size() : 0)
                    .toArray();
            List<float[]> ks = new ArrayList<>();
            List<float[]> vs = new ArrayList<>();
            for (String r : rids) {
                if (contextK.containsKey(r)) {
                    ks.addAll(contextK.get(r).get(layer));
                    vs.addAll(contextV.get(r).get(layer));
                }
            }
            float[] expected = DenseAttention.attend(q, concat(ks), concat(vs), qSpans, kvSpans, QO_HEADS, KV_HEADS,
                    HEAD_DIM, DenseAttention.FULL);
            for (int i = 0; i < expected.length; i++) {
                assertThat(actual[i]).as("layer %d element %d", layer, i)
                        .isCloseTo(expected[i], within(1e-5f));
            }
        }
    }

    private static float[] concat(List<float[]> rows) {
        int width = KV_HEADS * HEAD_DIM;
        float[] x = new float[rows.size() * width];
        for (int i = 0; i < rows.size(); i++) {
            System.arraycopy(rows.get(i), 0, x, i * width, width);
        }
        return x;
    }

    @ParameterizedTest(name = "queriesFromKv={0}")
    @ValueSource(booleans = {true, false})
    void queriesAttendTheWholeContextWrittenOnceAndExtendingItIsRefused(boolean queriesFromKv) {
        CrossAttentionManager cross = cross(queriesFromKv);
        StepRunner runner = new StepRunner(Map.of("kv", kv, "cross", cross), null);
        String label = queriesFromKv ? "main" : "dec";
        runner.ingestRequest("a", Map.of());
        runner.ingestRequest("b", Map.of());

        // encode: each request's prompt tokens and its whole context in one step
        List<Map<String, int[]>> steps = List.of(ordered("a", 3, 6, "b", 2, 9), ordered("a", 1, 0, "b", 1, 0),
                ordered("b", 1, 0, "a", 4, 0));
        for (Map<String, int[]> spans : steps) {
            SubmoduleStep step = step(queriesFromKv, spans, List.copyOf(spans.keySet()));
            assertThat(runner.admit(step).ok()).isTrue();
            runner.plan(step);
            writeContexts(spans);
            attendAndCheck(cross, label, spans);
            runner.commit(step);
        }
        assertThat(cross.contextWritten("a")).isTrue();

        SubmoduleStep extend = step(queriesFromKv, ordered("a", 1, 2, "b", 1, 0), List.of("a", "b"));
        FullAdmitOutcome refused = runner.admit(extend);

        assertThat(refused.ok()).isFalse();
        assertThat(refused.failedResource()).isEqualTo("cross");
        assertThat(refused.reason()).isInstanceOfSatisfying(AdmitRuntimeError.class, e -> {
            assertThat(e.terminal()).isTrue();
            assertThat(e.requestIds()).containsExactly("a");
        });
        // the refusal left nothing behind: the same request still attends its context as before
        SubmoduleStep after = step(queriesFromKv, ordered("a", 1, 0), List.of("a"));
        assertThat(runner.admit(after).ok()).isTrue();
        runner.plan(after);
        attendAndCheck(cross, label, ordered("a", 1, 0));
    }

    @Test
    void aPaddingRowWithoutContextGetsZerosAndLeavesRealRowsAlone() {
        CrossAttentionManager cross = cross(true);
        StepRunner runner = new StepRunner(Map.of("kv", kv, "cross", cross), null);
        runner.ingestRequest("a", Map.of());
        SubmoduleStep encode = step(true, ordered("a", 2, 5), List.of("a"));
        assertThat(runner.admit(encode).ok()).isTrue();
        runner.plan(encode);
        writeContexts(ordered("a", 2, 5));
        runner.commit(encode);

        // a replay padded to two rows: the dummy row declares its query but no context
        SubmoduleStep padded = step(true, ordered("a", 1, 0, "-1", 1, -1), List.of("a"));
        assertThat(runner.admit(padded).ok()).isTrue();
        runner.plan(padded);
        float[] q = randoms(2 * QO_HEADS * HEAD_DIM);
        Tensor out = device.fromFloats(randoms(2 * QO_HEADS * HEAD_DIM), DType.F32, 2, QO_HEADS, HEAD_DIM);
        cross.run(device.fromFloats(q, DType.F32, 2, QO_HEADS, HEAD_DIM), "main", 0, kv.pool(), out);
        float[] actual = device.toFloats(out);

        int width = QO_HEADS * HEAD_DIM;
        float[] expected = DenseAttention.attend(slice(q, 0, width), concat(contextK.get("a").get(0)),
                concat(contextV.get("a").get(0)), new int[] {1}, new int[] {5}, QO_HEADS, KV_HEADS, HEAD_DIM,
                DenseAttention.FULL);
        for (int i = 0; i < width; i++) {
            assertThat(actual[i]).isCloseTo(expected[i], within(1e-5f));
        }
        assertThat(slice(actual, width, width)).containsOnly(0f);
        assertThat(cross.currentPlan().requestIds("main")).containsExactly("a", "-1");
    }

    @Test
    void leasedPlansRewriteTheBucketsStaticTablesForEachStepsContexts() {
        CrossAttentionManager cross = cross(true);
        StepRunner runner = new StepRunner(Map.of("kv", kv, "cross", cross), null);
        runner.ingestRequest("a", Map.of());
        runner.ingestRequest("b", Map.of());
        SubmoduleStep encode = step(true, ordered("a", 2, 13, "b", 1, 3), List.of("a", "b"));
        assertThat(runner.admit(encode).ok()).isTrue();
        runner.plan(encode);
        writeContexts(ordered("a", 2, 13, "b", 1, 3));
        runner.commit(encode);

        // one captured decode bucket replayed twice, rows in either order: the same static tables, rewritten
        for (Map<String, int[]> decode : List.of(ordered("a", 1, 0, "b", 1, 0), ordered("b", 1, 0, "a", 1, 0))) {
            SubmoduleStep step = step(true, decode, List.copyOf(decode.keySet()));
            step.ctx().setSlotLease(new SlotLease(0, new BucketKey("decode", 2, 2)));
            assertThat(runner.admit(step).ok()).isTrue();
            runner.plan(step);
            assertThat(cross.currentPlan().paged("main").maxKvLen()).isEqualTo(MAX_SEQ_LEN);
            attendAndCheck(cross, "main", decode);
            runner.commit(step);
        }
    }
}
