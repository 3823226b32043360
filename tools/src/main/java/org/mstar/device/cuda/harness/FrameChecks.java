package org.mstar.device.cuda.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.RingAttentionPlan;
import org.mstar.engine.frame.FrameEngine;
import org.mstar.engine.frame.FrameInput;
import org.mstar.engine.frame.FrameResult;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.ring.RingAttentionRows;
import org.mstar.resources.kv.ring.RingKVManager;

/**
 * Frame streams on the GPU against the CPU: {@code ringAttention} over row lists a batched CPU ring planned
 * after several committed frames (dilated and wrapped layers, several sessions), {@code ringAppend}, and a
 * whole random frame model stepping several sessions through {@link FrameEngine} on each device.
 */
final class FrameChecks {
    private static final int TPF = 256;
    private static final int KV_HEADS = 4;
    private static final int QO_HEADS = 16;
    private static final int HEAD_DIM = 128;
    private static final int SESSIONS = 4;

    private final Twin tw;
    private final List<CheckResult> results = new ArrayList<>();

    FrameChecks(Twin twin) {
        this.tw = twin;
    }

    List<CheckResult> run() {
        for (DType dt : new DType[] {DType.F32, DType.BF16}) {
            CheckResult.attempt(results, "ringAttention " + dt, () -> ringAttention(dt));
            CheckResult.attempt(results, "ringAppend " + dt, () -> ringAppend(dt));
        }
        CheckResult.attempt(results, "frame engine", this::engine);
        return results;
    }

    /** Plans of both layers for one step of every session, after each session committed a different number of frames. */
    private void ringAttention(DType dt) {
        List<RingKVLayerConfig> layers = List.of(new RingKVLayerConfig(6, 6, 1), new RingKVLayerConfig(8, 3, 2));
        RingKVConfig config = new RingKVConfig(2, KV_HEADS, HEAD_DIM, QO_HEADS, TPF, layers, SESSIONS);
        RingKVManager ring = RingKVManager.batched(config, tw.cpu, DType.F32);
        List<RingKVStep.Frame> frames = new ArrayList<>();
        for (int s = 0; s < SESSIONS; s++) {
            String rid = "s" + s;
            ring.ingestRequest(rid, null);
            int committed = 3 + 4 * s; // up to 15 frames: the 6-slot layer wraps, the dilated one too
            for (int fp = 0; fp < committed; fp++) {
                RingKVStep step = new RingKVStep(List.of(), List.of(new RingKVStep.Frame(rid, fp)));
                StepContext ctx = new StepContext(List.of(rid), "frame", 0, false);
                ring.admit(step, ctx);
                ring.commit(step, ctx);
            }
            frames.add(new RingKVStep.Frame(rid, committed));
        }
        for (int layer = 0; layer < 2; layer++) {
            int rows = (int) ring.buffer(layer).dim(0);
            int[] qo;
            int[] kvPtr;
            int[] kvRows;
            RingAttentionPlan cpuPlan;
            try (RingAttentionRows r = ring.attentionRows(layer, frames, 0.088f)) {
                cpuPlan = r.plan();
                qo = tw.cpu.toInts(cpuPlan.qoIndptr());
                kvPtr = tw.cpu.toInts(cpuPlan.kvIndptr());
                kvRows = tw.cpu.toInts(cpuPlan.kvRows());
            }
            int n = SESSIONS * TPF;
            Twin.Pair buffer = tw.floats(tw.randomFloats(rows * 2 * KV_HEADS * HEAD_DIM, 1f, dt), dt, rows, 2, KV_HEADS, HEAD_DIM);
            Twin.Pair q = tw.floats(tw.randomFloats(n * QO_HEADS * HEAD_DIM, 1f, dt), dt, n, QO_HEADS, HEAD_DIM);
            Twin.Pair qoT = tw.ints(qo, qo.length);
            Twin.Pair kvPtrT = tw.ints(kvPtr, kvPtr.length);
            Twin.Pair kvRowsT = tw.ints(kvRows, kvRows.length);
            Twin.Pair out = tw.poisoned(dt, n, QO_HEADS, HEAD_DIM);
            RingAttentionPlan onCpu = new RingAttentionPlan(SESSIONS, qoT.cpu(), kvPtrT.cpu(), kvRowsT.cpu(), n, TPF,
                    cpuPlan.maxKvLen(), cpuPlan.smScale());
            RingAttentionPlan onGpu = new RingAttentionPlan(SESSIONS, qoT.gpu(), kvPtrT.gpu(), kvRowsT.gpu(), n, TPF,
                    cpuPlan.maxKvLen(), cpuPlan.smScale());
            tw.cpu.ops().ringAttention(q.cpu(), buffer.cpu(), onCpu, out.cpu());
            Runnable gpu = () -> tw.gpu.ops().ringAttention(q.gpu(), buffer.gpu(), onGpu, out.gpu());
            gpu.run();
            double error = Twin.relErr(tw.cpu.toFloats(out.cpu()), tw.gpu.toFloats(out.gpu()));
            double ms = tw.median(gpu);
            results.add(new CheckResult("ringAttention", "layer " + layer + ": " + SESSIONS + "x" + TPF + " q, "
                    + QO_HEADS + "/" + KV_HEADS + "x" + HEAD_DIM + ", up to " + cpuPlan.maxKvLen() + " rows",
                    dt.toString(), error, Twin.tolerance(dt), ms, "cpu"));
            close(buffer, q, qoT, kvPtrT, kvRowsT, out);
        }
        ring.cleanup();
    }

    private void ringAppend(DType dt) {
        int rows = 3 * TPF;
        int n = TPF;
        int[] target = new int[n];
        for (int i = 0; i < n; i++) target[i] = TPF + (i * 7) % (2 * TPF); // a scattered but injective row map
        Twin.Pair k = tw.floats(tw.randomFloats(n * KV_HEADS * HEAD_DIM, 1f, dt), dt, n, KV_HEADS, HEAD_DIM);
        Twin.Pair v = tw.floats(tw.randomFloats(n * KV_HEADS * HEAD_DIM, 1f, dt), dt, n, KV_HEADS, HEAD_DIM);
        Twin.Pair ring = tw.floats(new float[rows * 2 * KV_HEADS * HEAD_DIM], dt, rows, 2, KV_HEADS, HEAD_DIM);
        Twin.Pair idx = tw.ints(target, n);
        tw.cpu.ops().ringAppend(k.cpu(), v.cpu(), ring.cpu(), idx.cpu());
        Runnable gpu = () -> tw.gpu.ops().ringAppend(k.gpu(), v.gpu(), ring.gpu(), idx.gpu());
        gpu.run();
        float[] ref = tw.cpu.toFloats(ring.cpu());
        float[] got = tw.gpu.toFloats(ring.gpu());
        int bad = 0;
        for (int i = 0; i < ref.length; i++) if (Float.compare(ref[i], got[i]) != 0) bad++;
        results.add(new CheckResult("ringAppend", n + " rows into " + rows, dt.toString(), bad, 0, tw.median(gpu), "cpu"));
        close(k, v, ring, idx);
    }

    /** Three sessions stepped together for six frames (one joins late), feeding predictions back; logits compared. */
    private void engine() {
        FrameModelConfig config = new FrameModelConfig(256, 256, 8, 2, 32, 512, 128, 6, 1e-5, 10000,
                List.of(new RingKVLayerConfig(3, 3, 1), new RingKVLayerConfig(4, 2, 2), new RingKVLayerConfig(2, 2, 1)));
        long seed = tw.rnd.nextLong();
        Random random = new Random(seed);
        double diff = 0;
        double norm = 0;
        int tokenMismatches = 0;
        long frames = 0;
        try (FrameModel cpuModel = FrameModel.random(config, tw.cpu, DType.F32, seed);
             FrameModel gpuModel = FrameModel.random(config, tw.gpu, DType.F32, seed);
             FrameEngine cpu = new FrameEngine(cpuModel, 3);
             FrameEngine gpu = new FrameEngine(gpuModel, 3)) {
            int[][] current = new int[3][];
            for (int step = 0; step < 6; step++) {
                List<FrameInput> inputs = new ArrayList<>();
                for (int s = 0; s < 3; s++) {
                    if (step < s) continue; // session s joins at step s
                    if (step == s) {
                        cpu.open("s" + s);
                        gpu.open("s" + s);
                        current[s] = new int[config.tokensPerFrame()];
                        for (int t = 0; t < current[s].length; t++) current[s][t] = random.nextInt(config.vocabSize());
                    }
                    inputs.add(new FrameInput("s" + s, step - s, current[s], random.nextInt(config.numActions())));
                }
                List<FrameResult> ref = cpu.step(inputs, true);
                List<FrameResult> got = gpu.step(inputs, true);
                for (int i = 0; i < ref.size(); i++) {
                    float[] a = ref.get(i).logits();
                    float[] b = got.get(i).logits();
                    for (int j = 0; j < a.length; j++) {
                        double d = (double) b[j] - a[j];
                        diff += Float.isFinite(b[j]) ? d * d : Double.POSITIVE_INFINITY;
                        norm += (double) a[j] * a[j];
                    }
                    tokenMismatches += (int) Twin.mismatches(ref.get(i).tokens(), got.get(i).tokens());
                    // both continue from the CPU's frame, so one near-tie cannot fork the comparison
                    current[Integer.parseInt(ref.get(i).sessionId().substring(1))] = ref.get(i).tokens();
                    frames++;
                }
            }
        }
        results.add(new CheckResult("frame engine logits", "3 layers, 3 sessions, " + frames + " frames of "
                + config.tokensPerFrame() + " (" + tokenMismatches + " argmax differences)", "F32",
                Math.sqrt(diff / norm), 1e-3, 0, "cpu"));
    }

    private static void close(Twin.Pair... pairs) {
        for (Twin.Pair p : pairs) {
            p.cpu().close();
            p.gpu().close();
        }
    }
}
