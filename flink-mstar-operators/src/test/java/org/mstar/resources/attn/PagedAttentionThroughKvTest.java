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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.mstar.device.DType;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.KVStep;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.position.RopeManager;
import org.mstar.resources.runner.StepRunner;

/**
 * The layer sequence a model runs (rotate q and k at the planned positions, write K/V through the KV
 * manager, attend over the pages) gives what plain dense attention gives over each request's unpaged,
 * rotated K/V, for ragged batches mixing prefill chunks and decode rows, every mask variant.
 */
class PagedAttentionThroughKvTest {
    private static final int LAYERS = 2;
    private static final int KV_HEADS = 2;
    private static final int QO_HEADS = 4;
    private static final int HEAD_DIM = 8;
    private static final int PAGE_SIZE = 4;
    private static final int MAX_SEQ_LEN = 64;

    private final CpuDevice device = new CpuDevice(1);
    private final Random random = new Random(20240611);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    /** Request → span per step: a and b start with prefill chunks, c arrives later, all end decoding. */
    private static final List<Map<String, Integer>> STEPS = List.of(
            ordered("a", 5, "b", 3),
            ordered("a", 1, "b", 6, "c", 7),
            ordered("a", 1, "b", 1, "c", 2),
            ordered("c", 1, "a", 1, "b", 1));

    private static Map<String, Integer> ordered(Object... ridSpan) {
        Map<String, Integer> m = new LinkedHashMap<>();
        for (int i = 0; i < ridSpan.length; i += 2) {
            m.put((String) ridSpan[i], (Integer) ridSpan[i + 1]);
        }
        return m;
    }

    @ParameterizedTest(name = "causal={0} window={1} contextOnly={2}")
    @CsvSource({"true, 0, false", "true, 3, false", "false, 0, false", "true, 0, true"})
    void pagedAttentionEqualsDenseAttentionOverTheUnpagedKv(boolean causal, int window, boolean contextOnly) {
        PagedKVConfig kvConfig = PagedKVConfig.builder(LAYERS, KV_HEADS, HEAD_DIM, MAX_SEQ_LEN)
                .numQoHeads(QO_HEADS).pageSize(PAGE_SIZE).maxNumPages(64).build();
        KVManager kv = new KVManager(kvConfig, device, DType.F32, 1, 0, null);
        AttentionManager attn = new AttentionManager(
                new AttentionConfig("kv").withSlidingWindow(window == 0 ? null : window), HEAD_DIM, MAX_SEQ_LEN, device);
        RopeManager pos = new RopeManager(new PositionConfig("kv"), HEAD_DIM, device);
        StepRunner runner = new StepRunner(Map.of("kv", kv, "attn", attn, "pos", pos), null);
        RopeParams rope = pos.ropeParams();
        Map<String, Integer> resident = new HashMap<>();
        // per request, per layer: rotated K and V of every token so far, [pos][head][dim]
        Map<String, List<List<float[][]>>> keys = new HashMap<>();
        Map<String, List<List<float[][]>>> values = new HashMap<>();

        for (Map<String, Integer> spans : STEPS) {
            List<String> rids = List.copyOf(spans.keySet());
            for (String rid : rids) {
                if (!resident.containsKey(rid)) {
                    runner.ingestRequest(rid, Map.of());
                    resident.put(rid, 0);
                    keys.put(rid, perLayer());
                    values.put(rid, perLayer());
                }
            }
            List<Segment> segments = new ArrayList<>();
            spans.forEach((rid, span) -> segments.add(new Segment(rid, "main", span)));
            SubmoduleStep step = new SubmoduleStep(Map.of("kv", new KVStep(), "attn",
                    new AttentionStep(null, causal, contextOnly), "pos", new PositionStep()), segments)
                    .setCtx(new StepContext(rids, "mixed", 0, false));
            FullAdmitOutcome admitted = runner.admit(step);
            assertThat(admitted.outcome().ok()).isTrue();
            runner.plan(step);
            int tokens = spans.values().stream().mapToInt(Integer::intValue).sum();
            // RoPE is relative, so attention alone would not notice positions shifted as a whole
            assertThat(device.toInts(pos.posIds("main"))).containsExactly(absolutePositions(spans, resident));

            for (int layer = 0; layer < LAYERS; layer++) {
                float[] q = randoms(tokens * QO_HEADS * HEAD_DIM);
                float[] k = randoms(tokens * KV_HEADS * HEAD_DIM);
                float[] v = randoms(tokens * KV_HEADS * HEAD_DIM);
                float[][][] rotatedQ = referenceRotate(q, k, v, spans, resident, layer, rope, keys, values);

                Tensor qt = device.fromFloats(q, DType.F32, tokens, QO_HEADS, HEAD_DIM);
                Tensor kt = device.fromFloats(k, DType.F32, tokens, KV_HEADS, HEAD_DIM);
                Tensor vt = device.fromFloats(v, DType.F32, tokens, KV_HEADS, HEAD_DIM);
                Tensor out = device.zeros(DType.F32, tokens, QO_HEADS, HEAD_DIM);
                pos.applyQk(qt, kt, "main");
                kv.writeKv(kt, vt, layer, "main");
                attn.run(qt, "main", layer, kv.pool(), out);

                float[] expected = dense(rotatedQ, spans, resident, layer, keys, values, causal, window, contextOnly);
                float[] actual = device.toFloats(out);
                for (int i = 0; i < expected.length; i++) {
                    assertThat(actual[i]).as("layer %d element %d", layer, i).isCloseTo(expected[i], within(1e-4f));
                }
            }
            runner.commit(step);
            spans.forEach((rid, span) -> resident.merge(rid, span, Integer::sum));
        }
        for (String rid : resident.keySet()) {
            assertThat(pos.position(rid, "main")).isEqualTo(resident.get(rid));
        }
    }

    private static int[] absolutePositions(Map<String, Integer> spans, Map<String, Integer> resident) {
        List<Integer> positions = new ArrayList<>();
        spans.forEach((rid, span) -> {
            for (int t = 0; t < span; t++) {
                positions.add(resident.get(rid) + t);
            }
        });
        return positions.stream().mapToInt(Integer::intValue).toArray();
    }

    private static List<List<float[][]>> perLayer() {
        List<List<float[][]>> l = new ArrayList<>();
        for (int i = 0; i < LAYERS; i++) {
            l.add(new ArrayList<>());
        }
        return l;
    }

    private float[] randoms(int n) {
        return Gaussians.draw(random, n);
    }

    /**
     * Rotates each token's q and k on its own at the absolute position the test expects (resident + index),
     * appends the rotated k and v to its request's unpaged history, and returns the rotated q per token.
     */
    private float[][][] referenceRotate(float[] q, float[] k, float[] v, Map<String, Integer> spans,
                                        Map<String, Integer> resident, int layer, RopeParams rope,
                                        Map<String, List<List<float[][]>>> keys,
                                        Map<String, List<List<float[][]>>> values) {
        int qw = QO_HEADS * HEAD_DIM;
        int kw = KV_HEADS * HEAD_DIM;
        List<float[][]> rotated = new ArrayList<>();
        int token = 0;
        for (Map.Entry<String, Integer> e : spans.entrySet()) {
            for (int t = 0; t < e.getValue(); t++, token++) {
                Tensor qi = device.fromFloats(slice(q, token * qw, qw), DType.F32, 1, QO_HEADS, HEAD_DIM);
                Tensor ki = device.fromFloats(slice(k, token * kw, kw), DType.F32, 1, KV_HEADS, HEAD_DIM);
                device.ops().rope(qi, ki, device.fromInts(new int[] {resident.get(e.getKey()) + t}, 1), rope);
                rotated.add(heads(device.toFloats(qi), QO_HEADS));
                keys.get(e.getKey()).get(layer).add(heads(device.toFloats(ki), KV_HEADS));
                values.get(e.getKey()).get(layer).add(heads(slice(v, token * kw, kw), KV_HEADS));
            }
        }
        return rotated.toArray(float[][][]::new);
    }

    /** Softmax attention of each query over its request's visible unpaged keys, in packed token order. */
    private static float[] dense(float[][][] q, Map<String, Integer> spans, Map<String, Integer> resident, int layer,
                                 Map<String, List<List<float[][]>>> keys, Map<String, List<List<float[][]>>> values,
                                 boolean causal, int window, boolean contextOnly) {
        float[] out = new float[q.length * QO_HEADS * HEAD_DIM];
        double scale = 1 / Math.sqrt(HEAD_DIM);
        int token = 0;
        for (Map.Entry<String, Integer> e : spans.entrySet()) {
            int prior = resident.get(e.getKey());
            int length = prior + e.getValue();
            List<float[][]> ks = keys.get(e.getKey()).get(layer);
            List<float[][]> vs = values.get(e.getKey()).get(layer);
            for (int t = 0; t < e.getValue(); t++, token++) {
                int position = prior + t;
                int last = contextOnly ? prior - 1 : causal ? position : length - 1;
                int first = window > 0 ? Math.max(0, position - window + 1) : 0;
                for (int h = 0; h < QO_HEADS; h++) {
                    int kvHead = h / (QO_HEADS / KV_HEADS);
                    double[] w = new double[Math.max(0, last - first + 1)];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = first; j <= last; j++) {
                        double dot = 0;
                        for (int d = 0; d < HEAD_DIM; d++) {
                            dot += q[token][h][d] * ks.get(j)[kvHead][d];
                        }
                        w[j - first] = dot * scale;
                        max = Math.max(max, w[j - first]);
                    }
                    double sum = 0;
                    for (int j = 0; j < w.length; j++) {
                        w[j] = Math.exp(w[j] - max);
                        sum += w[j];
                    }
                    for (int d = 0; d < HEAD_DIM; d++) {
                        double acc = 0;
                        for (int j = first; j <= last; j++) {
                            acc += w[j - first] / sum * vs.get(j)[kvHead][d];
                        }
                        out[(token * QO_HEADS + h) * HEAD_DIM + d] = (float) acc;
                    }
                }
            }
        }
        return out;
    }

    private static float[] slice(float[] x, int from, int n) {
        float[] s = new float[n];
        System.arraycopy(x, from, s, 0, n);
        return s;
    }

    private static float[][] heads(float[] x, int heads) {
        float[][] h = new float[heads][HEAD_DIM];
        for (int i = 0; i < heads; i++) {
            System.arraycopy(x, i * HEAD_DIM, h[i], 0, HEAD_DIM);
        }
        return h;
    }
}
