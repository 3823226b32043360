package org.mstar.model.frame;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;

/**
 * A small decoder-only transformer whose unit of generation is a frame: a step takes each session's current
 * frame ({@code tokensPerFrame} token ids) and its action id, and predicts the next frame's tokens, one per
 * position. Each token's input is its embedding plus its frame's action embedding; positions are absolute
 * ({@code framePos * tokensPerFrame + i}, RoPE). A layer is RMSNorm, fused QKV, RoPE, attention through a
 * {@link FrameAttention} (a frame sees itself whole and the history its layer's ring keeps), output projection,
 * RMSNorm with the residual, SiLU-gated MLP. The residual stream is F32.
 */
public final class FrameModel implements AutoCloseable {
    private final FrameModelConfig config;
    private final FrameWeights weights;
    private final Device device;
    private final DType activations;
    private final RopeParams rope;

    public FrameModel(FrameModelConfig config, FrameWeights weights, Device device, DType activations) {
        this.config = config;
        this.weights = weights;
        this.device = device;
        this.activations = activations;
        this.rope = RopeParams.standard(config.headDim(), config.ropeTheta());
    }

    /** The model in {@code folder} ({@value FrameModelConfig#FILE} and {@code model.safetensors}). */
    public static FrameModel load(Path folder, Device device, DType dtype) throws IOException {
        FrameModelConfig config = FrameModelConfig.read(folder);
        return new FrameModel(config, FrameWeights.load(folder, config, device, dtype), device, dtype);
    }

    public static FrameModel random(FrameModelConfig config, Device device, DType dtype, long seed) {
        return new FrameModel(config, FrameWeights.random(config, device, dtype, seed), device, dtype);
    }

    /** Random weights with projections ~ N(0, projectionStd²) ({@link FrameWeights#random(FrameModelConfig, Device, DType, long, double)}). */
    public static FrameModel random(FrameModelConfig config, Device device, DType dtype, long seed, double projectionStd) {
        return new FrameModel(config, FrameWeights.random(config, device, dtype, seed, projectionStd), device, dtype);
    }

    public FrameModelConfig config() { return config; }
    public Device device() { return device; }
    public DType activations() { return activations; }
    public FrameWeights weights() { return weights; }

    /** {@code 1 / sqrt(headDim)}. */
    public float smScale() {
        return (float) (1 / Math.sqrt(config.headDim()));
    }

    /**
     * One step over {@code frames = actions.length} frames: {@code tokens [frames * tokensPerFrame]} and each
     * frame's action and position. Ids must be in range (the caller validates what clients send).
     */
    public FrameOutput forward(int[] tokens, int[] actions, int[] framePositions, FrameAttention attention,
                               boolean keepLogits) {
        int frames = actions.length;
        int tpf = config.tokensPerFrame();
        if (tokens.length != frames * tpf || framePositions.length != frames) {
            throw new IllegalArgumentException(frames + " frames need " + frames * tpf + " tokens and as many positions, got "
                    + tokens.length + " tokens and " + framePositions.length + " positions");
        }
        int n = frames * tpf;
        int[] actionIds = new int[n];
        int[] positions = new int[n];
        for (int f = 0; f < frames; f++) {
            for (int t = 0; t < tpf; t++) {
                actionIds[f * tpf + t] = actions[f];
                positions[f * tpf + t] = Math.multiplyExact(framePositions[f], tpf) + t;
            }
        }
        List<Tensor> temps = new ArrayList<>();
        try {
            Tensor ids = track(temps, device.fromInts(tokens, n));
            Tensor actIds = track(temps, device.fromInts(actionIds, n));
            Tensor pos = track(temps, device.fromInts(positions, n));
            Tensor logits = track(temps, device.allocate(DType.F32, n, config.vocabSize()));
            Tensor next = track(temps, device.allocate(DType.I32, n));
            run(ids, actIds, pos, attention, logits, temps);
            device.ops().argmax(logits, next);
            return new FrameOutput(device.toInts(next), keepLogits ? device.toFloats(logits) : null);
        } finally {
            temps.forEach(Tensor::close);
        }
    }

    private void run(Tensor ids, Tensor actIds, Tensor pos, FrameAttention attention, Tensor logits, List<Tensor> temps) {
        ComputeOps ops = device.ops();
        FrameModelConfig c = config;
        int n = (int) ids.dim(0);
        int d = c.headDim();
        float eps = (float) c.rmsNormEps();
        Tensor residual = track(temps, device.allocate(DType.F32, n, c.hiddenSize()));
        Tensor action = track(temps, device.allocate(DType.F32, n, c.hiddenSize()));
        ops.embedding(weights.get("embed.weight"), ids, residual);
        ops.embedding(weights.get("action_embed.weight"), actIds, action);
        ops.add(residual, action, residual);
        Tensor normed = track(temps, device.allocate(activations, n, c.hiddenSize()));
        Tensor qkv = track(temps, device.allocate(activations, n, c.qSize() + 2L * c.kvSize()));
        Tensor q = track(temps, device.allocate(activations, n, c.numHeads(), d));
        Tensor k = track(temps, device.allocate(activations, n, c.numKvHeads(), d));
        Tensor v = track(temps, device.allocate(activations, n, c.numKvHeads(), d));
        Tensor attnOut = track(temps, device.allocate(activations, n, c.numHeads(), d));
        Tensor proj = track(temps, device.allocate(activations, n, c.hiddenSize()));
        Tensor gateUp = track(temps, device.allocate(activations, n, 2L * c.intermediateSize()));
        Tensor mlp = track(temps, device.allocate(activations, n, c.intermediateSize()));
        Tensor toAdd = null;
        for (int l = 0; l < c.numLayers(); l++) {
            // the first layer normalises the embeddings; later ones add the previous MLP output first
            ops.rmsNorm(toAdd == null ? residual : toAdd, toAdd == null ? null : residual,
                    weights.layer(l, "input_norm"), eps, normed);
            ops.matmul(normed, weights.layer(l, "qkv"), null, qkv);
            ops.splitQkv(qkv, q, k, v);
            ops.rope(q, k, pos, rope);
            attention.attend(l, q, k, v, attnOut);
            ops.matmul(attnOut.reshape(n, c.qSize()), weights.layer(l, "o"), null, proj);
            ops.rmsNorm(proj, residual, weights.layer(l, "post_norm"), eps, normed);
            ops.matmul(normed, weights.layer(l, "gate_up"), null, gateUp);
            ops.siluMul(gateUp, mlp);
            ops.matmul(mlp, weights.layer(l, "down"), null, proj);
            toAdd = proj;
        }
        ops.rmsNorm(toAdd, residual, weights.get("final_norm.weight"), eps, normed);
        ops.matmul(normed, weights.get("lm_head.weight"), null, logits);
    }

    private static Tensor track(List<Tensor> temps, Tensor t) {
        temps.add(t);
        return t;
    }

    @Override
    public void close() {
        weights.close();
    }
}
