package org.mstar.model.llama;

import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Fp8Weight;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.model.ModelConfig;
import org.mstar.model.lora.LoraModule;
import org.mstar.model.moe.MoeMlp;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.lora.AdapterManager;

/**
 * One forward over a planned step. Hidden states flow through a residual stream kept in F32; each
 * layer is RMSNorm → fused QKV projection, q/k/v split, RoPE and KV append (one op) → paged attention → O projection →
 * RMSNorm (fused residual add) → gate/up projection with SiLU·mul (one op) → down projection. Architecture variants
 * ({@link ModelConfig}): per-head q/k RMSNorm before RoPE (split, norm, RoPE and append as separate ops), Gemma's
 * scaled embeddings, norms of the attention and MLP outputs before they join the residual and GELU-tanh MLP, and a
 * RoPE per layer; and in the sparse layers of a mixture of experts, the routed experts ({@link MoeMlp}) in place of the
 * gated MLP. Temporaries are released when the pass ends.
 *
 * <p>Under tensor parallelism one pass runs per rank ({@link RankContext}), on its device with its heads, MLP columns,
 * experts and vocabulary rows; the o and down projections (and the experts) give partial sums that the ranks add
 * through the all-reduce before the residual stream takes them, so every rank holds the same residual stream.
 *
 * <p>When some row of the step runs with an adapter, each projection an adapter targets gains every row's own
 * adapter update ({@code addLora}) right after its matmul; a targeted projection whose fused op computes the matmul
 * inside one kernel with what follows it (qkv with RoPE and the KV append, gate/up with the activation) then runs
 * unfused for the whole step, correctness first. Steps without an adapter row run exactly as without adapters.
 *
 * <p>With W8A8 weights ({@link Fp8Weight#quantisesActivations()}) and no adapter in the step, the input norm and the
 * post-attention norm write their rows quantised to FP8 ({@link Fp8Rows}) for the qkv and gate/up products, and
 * SiLU·mul writes the down projection's input so; the o projection (its input comes from attention) and a GELU MLP
 * have their inputs quantised by the matmul.
 */
final class LlamaForwardPass extends DecoderPass {
    private final LlamaModel model;
    private final ModelConfig cfg;
    private final RankContext rank;

    LlamaForwardPass(LlamaModel model, DType activations) {
        this(model, activations, RankContext.single(model));
    }

    /** One rank's pass under tensor parallelism: its heads, columns, experts and vocabulary rows. */
    LlamaForwardPass(LlamaModel model, DType activations, RankContext rank) {
        super(rank.device(), activations, rank.layout().vocabCount(rank.rank()));
        this.model = model;
        this.cfg = model.config();
        this.rank = rank;
    }

    @Override
    protected void forward(Tensor tokens, int[] sampleRows, Tensor logits) {
        LlamaWeights w = rank.weights();
        LlamaResources res = model.resources();
        ShardLayout shard = rank.layout();
        int n = (int) tokens.dim(0);
        int hidden = cfg.hiddenSize();
        int q = shard.qSize();
        int kv = shard.kvSize();
        int d = cfg.headDim();
        int heads = shard.heads();
        int kvHeads = shard.kvHeads();
        int inter = shard.intermediate();

        Tensor residual = temp(DType.F32, n, hidden);
        ops.embedding(w.embedding(), tokens, residual);
        if (cfg.embeddingScale() != 1f) {
            ops.scale(residual, cfg.embeddingScale(), residual);
        }
        Tensor normed = temp(act, n, hidden);
        Tensor qkvT = temp(act, n, q + 2L * kv);
        Tensor qT = temp(act, n, q);
        Tensor attnOut = temp(act, n, q);
        Tensor proj = temp(act, n, hidden);
        Tensor gateUp = temp(act, n, 2L * inter);
        Tensor mlpAct = temp(act, n, inter);
        MoeMlp moe = cfg.moe().map(m -> new MoeMlp(device, m, n, act, temporaries,
                shard.expertFirst(rank.rank()), shard.experts())).orElse(null);
        Tensor projNormed = cfg.sandwichNorms() ? temp(act, n, hidden) : null;
        // k and v of their own only for norms over each row's whole q and k (per-head norms are in qkNormRopeAppend)
        boolean rowNorms = cfg.qkNorm() && (cfg.qNormSize() != d || cfg.kNormSize() != d);
        Tensor kT = rowNorms ? temp(act, n, kv) : null;
        Tensor vT = rowNorms ? temp(act, n, kv) : null;
        Tensor tensorsToAdd = null;
        float eps = (float) cfg.rmsNormEps();
        AdapterManager adapters = model.adaptersActive() ? res.adapters() : null;
        Tensor slots = adapters == null ? null : adapters.current().firstSlots(n);
        // W8A8: the norms and the activation hand the products FP8 rows (adapters read the bf16 rows instead)
        boolean fp8Rows = adapters == null && w8a8(w.layer(0).qkvWeight());
        Fp8Rows normedFp8 = fp8Rows ? fp8Temp(n, hidden) : null;
        Fp8Rows mlpActFp8 = fp8Rows ? fp8Temp(n, cfg.intermediateSize()) : null;

        for (int l = 0; l < cfg.numLayers(); l++) {
            LlamaLayerWeights lw = w.layer(l);
            // the first layer normalises the embeddings; later ones add the previous MLP output first
            Tensor qkvIn = fp8Rows && w8a8(lw.qkvWeight()) ? normedFp8 : normed;
            ops.rmsNorm(tensorsToAdd == null ? residual : tensorsToAdd, tensorsToAdd == null ? null : residual,
                    lw.inputNorm(), eps, qkvIn);
            Tensor q3 = qT.reshape(n, heads, d);
            Tensor pos = rank.inputs().positions(n);
            // windowed layers of a model with a local RoPE base rotate with it; the others as the position resource says
            RopeParams rope = cfg.localRopeTheta() > 0 && cfg.attentionWindow(l) > 0 ? cfg.ropeParams(l)
                    : res.rope().ropeParams();
            KVManager cache = res.kvFor(model, l);
            int poolLayer = res.poolLayers()[l];
            if (lw.qNorm() != null && cfg.qNormSize() == d && cfg.kNormSize() == d) {
                // per-head q/k norms sit between the projection and RoPE: the split, both norms, RoPE and the append
                // in one op after the projection
                ops.matmul(qkvIn, lw.qkvWeight(), lw.qkvBias(), qkvT);
                addLora(adapters, slots, LoraModule.Fused.QKV, l, normed, qkvT);
                rank.inputs().writeKv(cache, poolLayer, n, (pool, layer, pages, offsets) -> ops.qkNormRopeAppend(qkvT,
                        lw.qNorm(), lw.kNorm(), eps, pos, rope, pool, layer, pages, offsets, q3));
            } else if (lw.qNorm() != null) {
                // norms over each row's whole q and k (OLMoE) sit between the projection and RoPE, so the fused
                // split-RoPE-append cannot be used; one GEMM over the fused weight (the k and v slices alone are too
                // small to reach full bandwidth)
                ops.matmul(qkvIn, lw.qkvWeight(), lw.qkvBias(), qkvT);
                addLora(adapters, slots, LoraModule.Fused.QKV, l, normed, qkvT);
                Tensor k3 = kT.reshape(n, kvHeads, d);
                Tensor v3 = vT.reshape(n, kvHeads, d);
                ops.splitQkv(qkvT, q3, k3, v3);
                long qRows = (long) n * q / cfg.qNormSize();
                long kRows = (long) n * kv / cfg.kNormSize();
                ops.rmsNorm(qT.reshape(qRows, cfg.qNormSize()), null, lw.qNorm(), eps, qT.reshape(qRows, cfg.qNormSize()));
                ops.rmsNorm(kT.reshape(kRows, cfg.kNormSize()), null, lw.kNorm(), eps, kT.reshape(kRows, cfg.kNormSize()));
                ops.rope(q3, k3, pos, rope);
                rank.inputs().writeKv(cache, poolLayer, n, (pool, layer, pages, offsets) ->
                        ops.kvAppend(pool, layer, k3, v3, pages, offsets));
            } else if (updates(adapters, LoraModule.Fused.QKV)) {
                // the adapters' updates join q, k and v before RoPE and the append
                ops.matmul(normed, lw.qkvWeight(), lw.qkvBias(), qkvT);
                addLora(adapters, slots, LoraModule.Fused.QKV, l, normed, qkvT);
                rank.inputs().writeKv(cache, poolLayer, n, (pool, layer, pages, offsets) -> ops.qkvRopeAppend(qkvT,
                        pos, rope, pool, layer, pages, offsets, q3));
            } else {
                // projection, split, RoPE and KV append in one op: K and V go straight from it into the pool
                rank.inputs().writeKv(cache, poolLayer, n, (pool, layer, pages, offsets) ->
                        ops.qkvProjectionRopeAppend(qkvIn, lw.qkvWeight(), lw.qkvBias(), qkvT, pos, rope, pool, layer,
                                pages, offsets, q3));
            }
            rank.inputs().attend(res.forLayer(model, l), cache, q3, poolLayer, attnOut.reshape(n, heads, d));
            ops.matmul(attnOut, lw.oWeight(), null, proj);
            addLora(adapters, slots, LoraModule.Fused.O, l, attnOut, proj);
            // row-parallel: each rank's heads give a partial sum of the projection
            rank.sum(proj);
            Tensor attnResult = proj;
            if (lw.attentionOutputNorm() != null) {
                ops.rmsNorm(proj, null, lw.attentionOutputNorm(), eps, projNormed);
                attnResult = projNormed;
            }
            boolean mlpFp8 = fp8Rows && lw.moe() == null && !cfg.geluTanhMlp() && w8a8(lw.gateUpWeight())
                    && w8a8(lw.downWeight());
            ops.rmsNorm(attnResult, residual, lw.postAttentionNorm(), eps, mlpFp8 ? normedFp8 : normed);
            if (mlpFp8) {
                ops.matmul(normedFp8, lw.gateUpWeight(), null, gateUp);
                ops.siluMul(gateUp, mlpActFp8);
            } else if (lw.moe() != null) {
                // routed experts (no adapter targets them: LoraModule refuses MLP modules of a mixture of experts)
                moe.run(normed, lw.moe(), proj);
            } else if (updates(adapters, LoraModule.Fused.GATE_UP)) {
                // the adapters' updates join gate and up before the activation
                ops.matmul(normed, lw.gateUpWeight(), null, gateUp);
                addLora(adapters, slots, LoraModule.Fused.GATE_UP, l, normed, gateUp);
                if (cfg.geluTanhMlp()) {
                    ops.geluTanhMul(gateUp, mlpAct);
                } else {
                    ops.siluMul(gateUp, mlpAct);
                }
            } else {
                ops.gateUpActivation(normed, lw.gateUpWeight(), cfg.geluTanhMlp(), gateUp, mlpAct);
            }
            if (lw.moe() == null) {
                ops.matmul(mlpFp8 ? mlpActFp8 : mlpAct, lw.downWeight(), null, proj);
                addLora(adapters, slots, LoraModule.Fused.DOWN, l, mlpAct, proj);
            }
            // row-parallel down projection, or each rank's experts' share of every row
            rank.sum(proj);
            tensorsToAdd = proj;
            if (lw.mlpOutputNorm() != null) {
                ops.rmsNorm(proj, null, lw.mlpOutputNorm(), eps, projNormed);
                tensorsToAdd = projNormed;
            }
        }

        lmHead(residual, tensorsToAdd, model.lastRows(sampleRows), w.finalNorm(), eps, w.lmHead(), logits);
    }

    private static boolean w8a8(Tensor weight) {
        return weight instanceof Fp8Weight f && f.quantisesActivations();
    }

    /** FP8 rows {@code [n, width]} released with the pass's other temporaries. */
    private Fp8Rows fp8Temp(int n, long width) {
        return new Fp8Rows(temp(DType.U8, n, width), temp(DType.F32, n));
    }

    /** Whether some adapter of the step's library targets a module that {@code fused} computes. */
    private boolean updates(AdapterManager adapters, LoraModule.Fused fused) {
        return adapters != null && LoraModule.of(fused, cfg).stream().anyMatch(m -> adapters.targets(m.peftName()));
    }

    /**
     * Adds every row's adapter update of each module {@code fused} computes that some adapter targets to that module's
     * columns of {@code out}, from the projection's input {@code x}, in one op for all of them (they share x); nothing
     * without adapters in the step.
     */
    private void addLora(AdapterManager adapters, Tensor slots, LoraModule.Fused fused, int layer, Tensor x,
                         Tensor out) {
        if (adapters == null) {
            return;
        }
        List<LoraModule> targeted = LoraModule.of(fused, cfg).stream().filter(m -> adapters.targets(m.peftName()))
                .toList();
        if (targeted.isEmpty()) {
            return;
        }
        ops.addLoraGroup(x, targeted.stream().map(m -> adapters.a(m.peftName(), layer)).toList(),
                targeted.stream().map(m -> adapters.b(m.peftName(), layer)).toList(), adapters.scales(), slots, out,
                targeted.stream().mapToInt(m -> m.fusedColumn(cfg)).toArray());
    }
}
