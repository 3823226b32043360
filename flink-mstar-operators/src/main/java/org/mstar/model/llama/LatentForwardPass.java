package org.mstar.model.llama;

import org.mstar.device.DType;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.moe.MoeMlp;
import org.mstar.resources.kv.KVManager;

/**
 * One forward over a planned step of a DeepSeek-V2 model, in the order of transformers' DeepseekV2DecoderLayer:
 * RMSNorm → latent attention → RMSNorm (fused residual add) → the MLP: in a dense layer gate/up projection with
 * SiLU·mul → down projection, in a sparse one the routed and shared experts ({@link MoeMlp}). The attention writes each token's latent row ({@code kv_a_proj_with_mqa}, the latent normalised
 * by {@code kv_a_layernorm}, the rope part rotated) to the latent KV cache, absorbs {@code kv_b_proj}'s key
 * up-projection into the query, attends in the latent space, and applies the value up-projection and {@code o_proj}:
 * prefill chunks and decode rows alike, so a chunk over a cached prefix reads the prefix's latent rows as they are.
 * Temporaries are released when the pass ends.
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
        int n = (int) x.dim(0);
        int heads = cfg.numHeads();
        int r = mla.kvLoraRank();
        Tensor q = temp(act, n, (long) heads * mla.qkHeadDim());
        if (lw.qProj() != null) {
            ops.matmul(x, lw.qProj(), null, q);
        } else {
            Tensor qA = temp(act, n, mla.qLoraRank());
            ops.matmul(x, lw.qAProj(), null, qA);
            ops.rmsNorm(qA, null, lw.qANorm(), LATENT_NORM_EPS, qA);
            ops.matmul(qA, lw.qBProj(), null, q);
        }
        Tensor kvA = temp(act, n, mla.latentDim());
        ops.matmul(x, lw.kvAProj(), null, kvA);
        Tensor pos = res.rope().firstIds(LABEL, n);
        RopeParams rope = res.rope().ropeParams();
        KVManager cache = res.kv();
        cache.writeKv(layer, LABEL, n, (pool, l, pages, offsets) -> ops.latentAppend(kvA, lw.kvANorm(),
                LATENT_NORM_EPS, pos, rope, pool, l, pages, offsets));
        Tensor qLatent = temp(act, n, heads, mla.latentDim());
        ops.latentQuery(q.reshape(n, heads, mla.qkHeadDim()), lw.kvBProj(), pos, rope, qLatent);
        Tensor latent = temp(act, n, heads, r);
        res.attention().runLatent(qLatent, LABEL, layer, cache.pool(), latent);
        Tensor values = temp(act, n, heads, mla.vHeadDim());
        ops.latentValues(latent, lw.kvBProj(), values);
        ops.matmul(values.reshape(n, (long) heads * mla.vHeadDim()), lw.oProj(), null, out);
    }
}
