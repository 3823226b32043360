package org.mstar.engine.frame;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.frame.FrameAttention;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.kv.ring.DenseRingMask;
import org.mstar.resources.kv.ring.RingGeometry;

/**
 * The dense reference of frame attention: keeps every frame's K/V of every session and layer (F32, on the
 * host) and masks by {@link DenseRingMask}; attention in fp64. Set {@link #frames} before each forward.
 */
final class DenseFrameAttention implements FrameAttention {
    private final FrameModelConfig config;
    private final Device device;
    private final float scale;
    /** session -> layer -> frame position -> K/V {@code [tpf, 2, kvHeads, headDim]}. */
    private final Map<String, Map<Integer, Map<Integer, float[]>>> kept = new HashMap<>();
    private List<FrameInput> frames = List.of();

    DenseFrameAttention(FrameModelConfig config, Device device, float scale) {
        this.config = config;
        this.device = device;
        this.scale = scale;
    }

    void frames(List<FrameInput> step) {
        this.frames = step;
    }

    void forget(String session) {
        kept.remove(session);
    }

    @Override
    public void attend(int layer, Tensor q, Tensor k, Tensor v, Tensor out) {
        int tpf = config.tokensPerFrame();
        int kvh = config.numKvHeads();
        int d = config.headDim();
        int heads = config.numHeads();
        float[] qs = device.toFloats(q);
        float[] ks = device.toFloats(k);
        float[] vs = device.toFloats(v);
        RingKVLayerConfig lc = config.layers().get(layer);
        RingGeometry g = RingGeometry.of(tpf, lc);
        for (int f = 0; f < frames.size(); f++) {
            float[] kv = new float[tpf * 2 * kvh * d];
            for (int t = 0; t < tpf; t++) {
                System.arraycopy(ks, (f * tpf + t) * kvh * d, kv, (t * 2) * kvh * d, kvh * d);
                System.arraycopy(vs, (f * tpf + t) * kvh * d, kv, (t * 2 + 1) * kvh * d, kvh * d);
            }
            FrameInput in = frames.get(f);
            kept.computeIfAbsent(in.sessionId(), s -> new HashMap<>()).computeIfAbsent(layer, l -> new HashMap<>())
                    .put(in.framePos(), kv);
        }
        float[] o = new float[qs.length];
        for (int f = 0; f < frames.size(); f++) {
            FrameInput in = frames.get(f);
            Map<Integer, float[]> history = kept.get(in.sessionId()).get(layer);
            List<float[]> seen = DenseRingMask.visibleFrames(g, in.framePos()).stream().map(history::get).toList();
            int keys = seen.size() * tpf;
            for (int t = 0; t < tpf; t++) {
                for (int h = 0; h < heads; h++) {
                    int kvHead = h / (heads / kvh);
                    int qBase = ((f * tpf + t) * heads + h) * d;
                    double[] s = new double[keys];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < keys; j++) {
                        float[] kv = seen.get(j / tpf);
                        int kBase = (((j % tpf) * 2) * kvh + kvHead) * d;
                        double dot = 0;
                        for (int e = 0; e < d; e++) dot += qs[qBase + e] * kv[kBase + e];
                        s[j] = scale * dot;
                        max = Math.max(max, s[j]);
                    }
                    double sum = 0;
                    double[] acc = new double[d];
                    for (int j = 0; j < keys; j++) {
                        float[] kv = seen.get(j / tpf);
                        int vBase = (((j % tpf) * 2 + 1) * kvh + kvHead) * d;
                        double w = Math.exp(s[j] - max);
                        sum += w;
                        for (int e = 0; e < d; e++) acc[e] += w * kv[vBase + e];
                    }
                    for (int e = 0; e < d; e++) o[qBase + e] = (float) (acc[e] / sum);
                }
            }
        }
        ByteBuffer bytes = ByteBuffer.allocate(o.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        bytes.asFloatBuffer().put(o);
        device.copyFromHost(bytes, out);
    }
}
