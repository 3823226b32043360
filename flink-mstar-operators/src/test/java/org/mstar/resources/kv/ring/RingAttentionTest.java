package org.mstar.resources.kv.ring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;

/**
 * Ring attention over a batched ring against a dense reference that keeps every frame of every session and
 * masks by {@link DenseRingMask}: sessions step together in random interleavings, layers differ in horizon
 * and dilation, and every frame's output must match.
 */
class RingAttentionTest {
    private static final int TPF = RingKVConfig.BLOCK;
    private static final int KV_HEADS = 2;
    private static final int QO_HEADS = 4;
    private static final int HEAD_DIM = 8;
    private static final float SCALE = 0.35f;

    @Property(tries = 15)
    void ringAttentionEqualsTheDenseReferenceForEverySession(@ForAll @IntRange(min = 1, max = 4) int frames0,
                                                            @ForAll @IntRange(min = 1, max = 4) int buckets0,
                                                            @ForAll @IntRange(min = 1, max = 3) int dilation1,
                                                            @ForAll @IntRange(min = 1, max = 3) int sessions,
                                                            @ForAll @IntRange(min = 1, max = 9) int steps,
                                                            @ForAll long seed) {
        List<RingKVLayerConfig> layers = List.of(new RingKVLayerConfig(frames0, Math.min(buckets0, frames0), 1),
                new RingKVLayerConfig(3, 2, dilation1));
        CpuDevice device = new CpuDevice(1);
        RingKVConfig config = new RingKVConfig(2, KV_HEADS, HEAD_DIM, QO_HEADS, TPF, layers, sessions);
        RingKVManager ring = RingKVManager.batched(config, device, DType.F32);
        Random random = new Random(seed);
        // per session and layer, every frame's K/V [TPF, 2, kvHeads, headDim] as it was computed
        Map<String, List<List<float[]>>> history = new HashMap<>();
        Map<String, Integer> next = new HashMap<>();
        List<String> rids = new ArrayList<>();
        for (int s = 0; s < sessions; s++) {
            String rid = "s" + s;
            rids.add(rid);
            ring.ingestRequest(rid, null);
            history.put(rid, List.of(new ArrayList<>(), new ArrayList<>()));
            next.put(rid, 0);
        }
        for (int step = 0; step < steps; step++) {
            // a random non-empty subset of the sessions advances, in random order
            List<String> batch = new ArrayList<>();
            for (String rid : rids) if (random.nextBoolean()) batch.add(random.nextInt(batch.size() + 1), rid);
            if (batch.isEmpty()) batch.add(rids.get(random.nextInt(rids.size())));
            List<RingKVStep.Frame> fs = batch.stream().map(r -> new RingKVStep.Frame(r, next.get(r))).toList();
            RingKVStep ringStep = new RingKVStep(List.of(), fs);
            StepContext ctx = new StepContext(batch, "frame", 0, false);
            assertThat(ring.admit(ringStep, ctx)).isEqualTo(AdmitOutcome.OK);
            for (int layer = 0; layer < 2; layer++) {
                float[] q = randoms(random, fs.size() * TPF * QO_HEADS * HEAD_DIM);
                for (RingKVStep.Frame f : fs) {
                    float[] kv = randoms(random, TPF * 2 * KV_HEADS * HEAD_DIM);
                    history.get(f.requestId()).get(layer).add(kv);
                    try (Tensor t = device.fromFloats(kv, DType.F32, TPF, 2, KV_HEADS, HEAD_DIM)) {
                        ring.writeFrame(layer, ring.sessionOf(f.requestId()), t);
                    }
                }
                float[] got;
                try (Tensor qt = device.fromFloats(q, DType.F32, (long) fs.size() * TPF, QO_HEADS, HEAD_DIM);
                     Tensor out = device.zeros(DType.F32, (long) fs.size() * TPF, QO_HEADS, HEAD_DIM);
                     RingAttentionRows rows = ring.attentionRows(layer, fs, SCALE)) {
                    device.ops().ringAttention(qt, ring.buffer(layer), rows.plan(), out);
                    got = device.toFloats(out);
                }
                for (int i = 0; i < fs.size(); i++) {
                    RingKVStep.Frame f = fs.get(i);
                    List<float[]> keep = history.get(f.requestId()).get(layer);
                    List<float[]> seen = DenseRingMask.visibleFrames(ring.geometry(layer), f.framePos()).stream()
                            .map(keep::get).toList();
                    float[] want = dense(q, i, seen);
                    for (int e = 0; e < want.length; e++) {
                        assertThat(got[i * want.length + e]).as("frame %s layer %d element %d", f, layer, e)
                                .isCloseTo(want[e], org.assertj.core.data.Offset.offset(1e-4f));
                    }
                }
            }
            ring.commit(ringStep, ctx);
            for (String rid : batch) next.merge(rid, 1, Integer::sum);
            // continuity: replaying a committed frame, or skipping one, is refused terminally and changes nothing
            String rid = batch.get(0);
            int bad = random.nextBoolean() ? next.get(rid) - 1 : next.get(rid) + 1;
            AdmitOutcome refused = ring.admit(new RingKVStep(List.of(), List.of(new RingKVStep.Frame(rid, bad))),
                    new StepContext(List.of(rid), "frame", 0, false));
            assertThat(refused.ok()).isFalse();
            assertThat(refused.reason()).isInstanceOf(AdmitRuntimeError.class);
            assertThat(ring.lastFrame(rid)).isEqualTo(next.get(rid) - 1);
        }
    }

    /** Frame i's attention output, fp64, over the K/V of the frames it sees (each TPF tokens, all visible). */
    private static float[] dense(float[] q, int frame, List<float[]> seen) {
        float[] out = new float[TPF * QO_HEADS * HEAD_DIM];
        int keys = seen.size() * TPF;
        for (int t = 0; t < TPF; t++) {
            for (int h = 0; h < QO_HEADS; h++) {
                int kvHead = h / (QO_HEADS / KV_HEADS);
                int qBase = ((frame * TPF + t) * QO_HEADS + h) * HEAD_DIM;
                double[] scores = new double[keys];
                double max = Double.NEGATIVE_INFINITY;
                for (int j = 0; j < keys; j++) {
                    float[] kv = seen.get(j / TPF);
                    int kBase = (((j % TPF) * 2) * KV_HEADS + kvHead) * HEAD_DIM;
                    double dot = 0;
                    for (int d = 0; d < HEAD_DIM; d++) dot += q[qBase + d] * kv[kBase + d];
                    scores[j] = SCALE * dot;
                    max = Math.max(max, scores[j]);
                }
                double sum = 0;
                double[] acc = new double[HEAD_DIM];
                for (int j = 0; j < keys; j++) {
                    float[] kv = seen.get(j / TPF);
                    int vBase = (((j % TPF) * 2 + 1) * KV_HEADS + kvHead) * HEAD_DIM;
                    double w = Math.exp(scores[j] - max);
                    sum += w;
                    for (int d = 0; d < HEAD_DIM; d++) acc[d] += w * kv[vBase + d];
                }
                for (int d = 0; d < HEAD_DIM; d++) out[(t * QO_HEADS + h) * HEAD_DIM + d] = (float) (acc[d] / sum);
            }
        }
        return out;
    }

    private static float[] randoms(Random random, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = (float) random.nextGaussian();
        return v;
    }
}
