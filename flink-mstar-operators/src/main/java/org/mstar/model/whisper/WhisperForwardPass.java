package org.mstar.model.whisper;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.resources.kv.KVManager;

/**
 * One forward of {@link WhisperModel}, in the order of transformers' {@code WhisperForConditionalGeneration}, with
 * the residual stream in F32 and each LayerNorm fused with the residual add before it.
 *
 * <p>Encoder, per window: conv1 (k3 s1 p1) → GELU → conv2 (k3 s2 p1) → GELU → + sinusoidal positions; per layer
 * LayerNorm → fused q/k/v projection → bidirectional attention within the window → out projection → LayerNorm →
 * fc1 → GELU → fc2; final LayerNorm; then every decoder layer's cross-attention K and V of the output, written to
 * the request's context stream.
 *
 * <p>Decoder: token embedding + learned position; per layer LayerNorm → q/k/v → K/V appended to the cache → causal
 * paged attention → out projection → LayerNorm → q → attention over the context → out projection → LayerNorm →
 * fc1 → GELU → fc2; final LayerNorm on the output rows; logits against the (tied) token embedding.
 */
final class WhisperForwardPass {
    /** Attention of one encoder layer over the packed windows. */
    @FunctionalInterface
    private interface EncoderAttention {
        void run(Tensor q, Tensor k, Tensor v, Tensor out);
    }

    private final WhisperModel model;
    private final WhisperConfig cfg;
    private final WhisperWeights w;
    private final Device device;
    private final ComputeOps ops;
    private final DType act;
    private final List<Tensor> temporaries = new ArrayList<>();

    WhisperForwardPass(WhisperModel model) {
        this.model = model;
        this.cfg = model.config();
        this.w = model.weights();
        this.device = model.device();
        this.ops = device.ops();
        this.act = model.activations();
    }

    Tensor run(List<float[]> melWindows, Tensor tokens, int[] outputRows) {
        Tensor logits = device.allocate(DType.F32, outputRows.length, cfg.vocabSize());
        try {
            if (!melWindows.isEmpty()) {
                Tensor encoded = encoder(melWindows, (q, k, v, out) ->
                        model.encoderAttention().run(q, k, v, WhisperModel.AUDIO, out));
                writeContext(encoded);
            }
            int[] last = model.attention().lastRows(WhisperModel.MAIN);
            decoder(tokens, Arrays.stream(outputRows).map(r -> last[r]).toArray(), logits);
            return logits;
        } catch (RuntimeException e) {
            logits.close();
            throw e;
        } finally {
            temporaries.forEach(Tensor::close);
        }
    }

    /** The decoder over a decode step's rows (one token each), every row's logits into {@code logits}. */
    void runAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        try {
            decoder(tokens, null, logits);
        } finally {
            held.addAll(temporaries);
        }
    }

    float[] encodeAlone(float[] melWindow) {
        int frames = cfg.encoderFrames();
        try {
            Tensor indptr = track(device.fromInts(new int[] {0, frames}, 2));
            RaggedAttentionPlan plan = new RaggedAttentionPlan(1, indptr, indptr, frames, frames, frames, frames,
                    RaggedAttentionPlan.FULL, (float) (1 / Math.sqrt(cfg.encoderHeadDim())));
            Tensor encoded = encoder(List.of(melWindow), (q, k, v, out) -> ops.raggedAttention(q, k, v, plan, out));
            return device.toFloats(encoded);
        } finally {
            temporaries.forEach(Tensor::close);
        }
    }

    /** The encoder's final hidden states {@code [windows · frames, d]} in the activation dtype. */
    private Tensor encoder(List<float[]> melWindows, EncoderAttention attention) {
        int frames = cfg.encoderFrames();
        int melFrames = cfg.melFrames();
        int d = cfg.dModel();
        int n = melWindows.size() * frames;
        Tensor residual = temp(DType.F32, n, d);
        Tensor mel = temp(act, melFrames, cfg.numMelBins());
        Tensor conv1 = temp(act, melFrames, d);
        Tensor conv2 = temp(act, frames, d);
        for (int r = 0; r < melWindows.size(); r++) {
            float[] window = melWindows.get(r);
            if (window.length != melFrames * cfg.numMelBins()) {
                throw new IllegalArgumentException("a mel window has " + window.length + " values, expected "
                        + melFrames + " frames × " + cfg.numMelBins() + " bins");
            }
            try (Tensor host = device.fromFloats(window, act, melFrames, cfg.numMelBins())) {
                device.copy(host, mel);
            }
            // each window is convolved on its own: its zero padding must not see the neighbouring window
            ops.conv1d(mel, w.conv1(), w.conv1Bias(), 1, 1, conv1);
            ops.gelu(conv1, conv1);
            ops.conv1d(conv1, w.conv2(), w.conv2Bias(), 2, 1, conv2);
            ops.gelu(conv2, conv2);
            Tensor rows = residual.rows((long) r * frames, frames);
            ops.add(conv2, w.encoderPositions(), rows);
        }
        int ffn = cfg.encoderFfn();
        int heads = cfg.encoderHeads();
        int hd = cfg.encoderHeadDim();
        Tensor normed = temp(act, n, d);
        Tensor qkv = temp(act, n, 3L * d);
        Tensor q = temp(act, n, d);
        Tensor k = temp(act, n, d);
        Tensor v = temp(act, n, d);
        Tensor attnOut = temp(act, n, d);
        Tensor proj = temp(act, n, d);
        Tensor hidden = temp(act, n, ffn);
        Tensor toAdd = null;
        for (int l = 0; l < cfg.encoderLayers(); l++) {
            WhisperLayerWeights lw = w.encoderLayer(l);
            // the first layer normalises the stem's output; later ones add the previous MLP output first
            addAndNorm(toAdd, residual, lw.selfNorm(), lw.selfNormBias(), normed);
            ops.matmul(normed, lw.qkv(), lw.qkvBias(), qkv);
            ops.splitQkv(qkv, q, k, v);
            attention.run(q.reshape(n, heads, hd), k.reshape(n, heads, hd), v.reshape(n, heads, hd),
                    attnOut.reshape(n, heads, hd));
            ops.matmul(attnOut, lw.out(), lw.outBias(), proj);
            ops.layerNorm(proj, residual, lw.mlpNorm(), lw.mlpNormBias(), WhisperConfig.LAYER_NORM_EPS, normed);
            mlp(normed, lw, hidden, proj);
            toAdd = proj;
        }
        Tensor encoded = temp(act, n, d);
        addAndNorm(toAdd, residual, w.encoderNorm(), w.encoderNormBias(), encoded);
        return encoded;
    }

    /** Every decoder layer's cross-attention K and V of the encoder output, into the context streams. */
    private void writeContext(Tensor encoded) {
        int n = (int) encoded.dim(0);
        int d = cfg.dModel();
        int heads = cfg.decoderHeads();
        int hd = cfg.decoderHeadDim();
        Tensor k = temp(act, n, d);
        Tensor v = temp(act, n, d);
        KVManager kv = model.kv();
        for (int l = 0; l < cfg.decoderLayers(); l++) {
            WhisperLayerWeights lw = w.decoderLayer(l);
            // k_proj has no bias: its half of the fused bias is zeros
            ops.matmul(encoded, lw.crossKv().rows(0, d), null, k);
            ops.matmul(encoded, lw.crossKv().rows(d, d), lw.crossKvBias().rows(d, d), v);
            kv.writeKv(k.reshape(n, heads, hd), v.reshape(n, heads, hd), l, WhisperModel.CONTEXT);
        }
    }

    /**
     * The decoder over the step's tokens; {@code outputRows} index the tokens whose logits are wanted, null for
     * every token in order (no gather: a recorded graph uploads nothing from the host).
     */
    private void decoder(Tensor tokens, int[] outputRows, Tensor logits) {
        int n = (int) tokens.dim(0);
        int d = cfg.dModel();
        int heads = cfg.decoderHeads();
        int hd = cfg.decoderHeadDim();
        Tensor residual = temp(DType.F32, n, d);
        Tensor pos = temp(DType.F32, n, d);
        ops.embedding(w.embedding(), tokens, residual);
        if (cfg.scaleEmbedding()) {
            ops.scale(residual, (float) Math.sqrt(d), residual);
        }
        ops.embedding(w.decoderPositions(), model.positions().firstIds(WhisperModel.MAIN, n), pos);
        ops.add(residual, pos, residual);
        Tensor normed = temp(act, n, d);
        Tensor qkv = temp(act, n, 3L * d);
        Tensor q = temp(act, n, d);
        Tensor k = temp(act, n, d);
        Tensor v = temp(act, n, d);
        Tensor attnOut = temp(act, n, d);
        Tensor proj = temp(act, n, d);
        Tensor hidden = temp(act, n, cfg.decoderFfn());
        KVManager kv = model.kv();
        Tensor toAdd = null;
        for (int l = 0; l < cfg.decoderLayers(); l++) {
            WhisperLayerWeights lw = w.decoderLayer(l);
            addAndNorm(toAdd, residual, lw.selfNorm(), lw.selfNormBias(), normed);
            ops.matmul(normed, lw.qkv(), lw.qkvBias(), qkv);
            ops.splitQkv(qkv, q, k, v);
            kv.writeKv(k.reshape(n, heads, hd), v.reshape(n, heads, hd), l, WhisperModel.MAIN);
            model.attention().run(q.reshape(n, heads, hd), WhisperModel.MAIN, l, kv.pool(),
                    attnOut.reshape(n, heads, hd));
            ops.matmul(attnOut, lw.out(), lw.outBias(), proj);
            ops.layerNorm(proj, residual, lw.crossNorm(), lw.crossNormBias(), WhisperConfig.LAYER_NORM_EPS, normed);
            ops.matmul(normed, lw.crossQ(), lw.crossQBias(), q);
            model.cross().run(q.reshape(n, heads, hd), WhisperModel.MAIN, l, kv.pool(), attnOut.reshape(n, heads, hd));
            ops.matmul(attnOut, lw.crossOut(), lw.crossOutBias(), proj);
            ops.layerNorm(proj, residual, lw.mlpNorm(), lw.mlpNormBias(), WhisperConfig.LAYER_NORM_EPS, normed);
            mlp(normed, lw, hidden, proj);
            toAdd = proj;
        }
        Tensor lastResidual = residual;
        Tensor lastProj = toAdd;
        int m = n;
        if (outputRows != null) {
            m = outputRows.length;
            Tensor rowIdx = track(device.fromInts(outputRows, m));
            lastResidual = temp(DType.F32, m, d);
            ops.gatherRows(residual, rowIdx, lastResidual);
            if (toAdd != null) {
                lastProj = temp(act, m, d);
                ops.gatherRows(toAdd, rowIdx, lastProj);
            }
        }
        Tensor finalHidden = temp(act, m, d);
        ops.layerNorm(toAdd == null ? lastResidual : lastProj, toAdd == null ? null : lastResidual, w.decoderNorm(),
                w.decoderNormBias(), WhisperConfig.LAYER_NORM_EPS, finalHidden);
        ops.matmul(finalHidden, w.embedding(), null, logits);
    }

    /** fc1 → exact GELU → fc2, into {@code out}. */
    private void mlp(Tensor normed, WhisperLayerWeights lw, Tensor hidden, Tensor out) {
        ops.matmul(normed, lw.fc1(), lw.fc1Bias(), hidden);
        ops.gelu(hidden, hidden);
        ops.matmul(hidden, lw.fc2(), lw.fc2Bias(), out);
    }

    /**
     * Layer norm of the residual stream into {@code out}, after adding {@code pending} (the previous layer's MLP
     * output) into the stream; a null {@code pending} normalises the stream as it is.
     */
    private void addAndNorm(Tensor pending, Tensor residual, Tensor weight, Tensor bias, Tensor out) {
        ops.layerNorm(pending == null ? residual : pending, pending == null ? null : residual, weight, bias,
                WhisperConfig.LAYER_NORM_EPS, out);
    }

    private Tensor temp(DType dtype, long... shape) {
        return track(device.allocate(dtype, shape));
    }

    private Tensor track(Tensor t) {
        temporaries.add(t);
        return t;
    }
}
