package org.mstar.model.llama;

import org.mstar.device.DType;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.moe.MoeMlp;
import org.mstar.resources.attn.LatentPrefillPlan;
import org.mstar.resources.kv.KVManager;

/**
 * One forward over a planned step of a DeepSeek-V2 model, in the order of transformers' DeepseekV2DecoderLayer:
 * RMSNorm → latent attention → RMSNorm (fused residual add) → the MLP: in a dense layer gate/up projection with
 * SiLU·mul → down projection, in a sparse one the routed and shared experts ({@link MoeMlp}). The attention writes each token's latent row ({@code kv_a_proj_with_mqa}, the latent normalised
 * by {@code kv_a_layernorm}, the rope part rotated) to the latent KV cache, absorbs {@code kv_b_proj}'s key
 * up-projection into the query, attends in the latent space, and applies the value up-projection and {@code o_proj}:
 * prefill chunks and decode rows alike, so a chunk over a cached prefix reads the prefix's latent rows as they are.
 * A step whose keys are few against its query rows (a prompt's chunks, {@link LatentPrefillPlan}) attends per head
 * instead, over its keys' latent rows up-projected through {@link LatentPrefillWeights}, unless the device wants
 * batch-invariant numerics (a request's rows must then take one form whatever it is batched with). Temporaries are
 * released when the pass ends.
 */
final class LatentForwardPass extends DecoderPass {
    /** DeepseekV2RMSNorm's default epsilon, which q_a_layernorm and kv_a_layernorm keep whatever rms_norm_eps says. */
    private static final float LATENT_NORM_EPS = 1e-6f;

    private final LatentAttention mla;

    private final LlamaModel model;
    private final ModelConfig cfg;

    LatentForwardPass(LlamaModel model, DType activations) {
        super(model.device(), activations, model.config().vocabSize());
        this.model = model;
        this.cfg = model.config();
        if (model.adaptersActive()) {
            throw new UnsupportedOperationException("adapters are not supported on latent attention ("
                    + cfg.architecture().hfName() + ")");
        }
        this.mla = cfg.latentAttention().orElseThrow();
    }

    @Override
    protected void forward(Tensor tokens, int[] sampleRows, Tensor logits) {
        LlamaWeights w = model.weights();
        LlamaResources res = model.resources();
        int n = (int) tokens.dim(0);
        int hidden = cfg.hiddenSize();
        float eps = (float) cfg.rmsNormEps();

        Tensor residual = temp(DType.F32, n, hidden);
        ops.embedding(w.embedding(), tokens, residual);
        Tensor normed = temp(act, n, hidden);
        Tensor proj = temp(act, n, hidden);
        Tensor gateUp = temp(act, n, 2L * cfg.intermediateSize());
        Tensor mlpAct = temp(act, n, cfg.intermediateSize());
        MoeMlp moe = cfg.moe().map(m -> new MoeMlp(device, m, n, act, temporaries)).orElse(null);
        Tensor mlpOut = null;
        for (int l = 0; l < cfg.numLayers(); l++) {
            LlamaLayerWeights lw = w.layer(l);
            // the first layer normalises the embeddings; later ones add the previous MLP output first
            ops.rmsNorm(mlpOut == null ? residual : mlpOut, mlpOut == null ? null : residual, lw.inputNorm(), eps,
                    normed);
            attend(lw.latentAttention(), l, normed, res, proj);
            ops.rmsNorm(proj, residual, lw.postAttentionNorm(), eps, normed);
            if (lw.moe() != null) {
                moe.run(normed, lw.moe(), proj);
            } else {
                ops.gateUpActivation(normed, lw.gateUpWeight(), false, gateUp, mlpAct);
                ops.matmul(mlpAct, lw.downWeight(), null, proj);
            }
            mlpOut = proj;
        }

        lmHead(residual, mlpOut, model.lastRows(sampleRows), w.finalNorm(), eps, w.lmHead(), logits);
    }

    /** The latent attention of one layer: {@code x [n, H]} in, {@code out [n, H]} (after o_proj) out. */
    private void attend(LatentAttentionWeights lw, int layer, Tensor x, LlamaResources res, Tensor out) {
        LatentPrefillWeights prefill = device.options().batchInvariant() ? null : model.weights().latentPrefill(layer);
        LatentPrefillPlan plan = prefill == null ? null : res.attention().latentPrefill(LABEL);
        if (plan != null) {
            attendUpProjected(lw, prefill, plan, layer, x, res, out);
            return;
        }
        int n = (int) x.dim(0);
        int heads = cfg.numHeads();
        int r = mla.kvLoraRank();
        Tensor q = query(lw, lw.qProj() != null ? lw.qProj() : lw.qBProj(), x, (long) heads * mla.qkHeadDim());
        Tensor pos = res.rope().firstIds(LABEL, n);
        RopeParams rope = res.rope().ropeParams();
        KVManager cache = appendLatent(lw, layer, x, pos, rope, res);
        Tensor qLatent = temp(act, n, heads, mla.latentDim());
        ops.latentQuery(q.reshape(n, heads, mla.qkHeadDim()), lw.kvBProj(), pos, rope, qLatent);
        Tensor latent = temp(act, n, heads, r);
        res.attention().runLatent(qLatent, LABEL, layer, cache.pool(), latent);
        Tensor values = temp(act, n, heads, mla.vHeadDim());
        ops.latentValues(latent, lw.kvBProj(), values);
        ops.matmul(values.reshape(n, (long) heads * mla.vHeadDim()), lw.oProj(), null, out);
    }

    /** {@code x [n, H]} through the query's projection, its last ({@code weight}) into {@code width} columns. */
    private Tensor query(LatentAttentionWeights lw, Tensor weight, Tensor x, long width) {
        int n = (int) x.dim(0);
        Tensor q = temp(act, n, width);
        if (lw.qProj() != null) {
            ops.matmul(x, weight, null, q);
        } else {
            Tensor qA = temp(act, n, mla.qLoraRank());
            ops.matmul(x, lw.qAProj(), null, qA);
            ops.rmsNorm(qA, null, lw.qANorm(), LATENT_NORM_EPS, qA);
            ops.matmul(qA, weight, null, q);
        }
        return q;
    }

    /** Writes each token's latent row (kv_a_proj_with_mqa, normalised, rope part rotated) to the cache; returns it. */
    private KVManager appendLatent(LatentAttentionWeights lw, int layer, Tensor x, Tensor pos, RopeParams rope,
                                   LlamaResources res) {
        int n = (int) x.dim(0);
        Tensor kvA = temp(act, n, mla.latentDim());
        ops.matmul(x, lw.kvAProj(), null, kvA);
        KVManager cache = res.kv();
        cache.writeKv(layer, LABEL, n, (pool, l, pages, offsets) -> ops.latentAppend(kvA, lw.kvANorm(),
                LATENT_NORM_EPS, pos, rope, pool, l, pages, offsets));
        return cache;
    }

    /**
     * {@link #attend} over up-projected keys: the chunk's latent rows appended as there, then per head q (rope part
     * first, rotated), the keys and values of every latent row the step's sequences see (gathered from the pool,
     * through {@link LatentPrefillWeights}), one causal ragged attention, and o_proj over the padded heads.
     */
    private void attendUpProjected(LatentAttentionWeights lw, LatentPrefillWeights pw, LatentPrefillPlan plan,
                                   int layer, Tensor x, LlamaResources res, Tensor out) {
        int n = (int) x.dim(0);
        int heads = cfg.numHeads();
        int d = pw.headDim();
        Tensor q = query(lw, pw.q(), x, (long) heads * d);
        Tensor pos = res.rope().firstIds(LABEL, n);
        RopeParams rope = res.rope().ropeParams();
        KVManager cache = appendLatent(lw, layer, x, pos, rope, res);
        Tensor qHeads = q.reshape(n, heads, d);
        ops.rope(qHeads, null, pos, rope);
        Tensor pool = cache.pool();
        Tensor layerRows = pool.rows(layer, 1).reshape(pool.dim(1) * pool.dim(3), mla.latentDim());
        int keys = plan.keys();
        Tensor latentKeys = temp(pool.dtype(), keys, mla.latentDim());
        ops.gatherRows(layerRows, plan.keyRows(), latentKeys);
        Tensor k = temp(act, keys, (long) heads * d);
        Tensor v = temp(act, keys, (long) heads * d);
        ops.matmul(latentKeys, pw.k(), null, k);
        ops.matmul(latentKeys, pw.v(), null, v);
        Tensor attended = temp(act, n, (long) heads * d);
        ops.raggedAttention(qHeads, k.reshape(keys, heads, d), v.reshape(keys, heads, d), plan.attention(),
                attended.reshape(n, heads, d));
        ops.matmul(attended, pw.o(), null, out);
    }
}
