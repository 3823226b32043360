package org.mstar.model.mamba;

import org.mstar.device.DType;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.RopeParams;
import org.mstar.device.Tensor;
import org.mstar.model.HybridConfig;
import org.mstar.model.llama.DecoderPass;
import org.mstar.resources.recurrent.RecurrentPlan;
import org.mstar.resources.recurrent.RecurrentStateManager;

/**
 * One forward over a planned step, as transformers' Mamba2ForCausalLM and BambaForCausalLM compute it, over an F32
 * residual stream. A layer is RMSNorm (fused with adding the previous layer's output) → mixer or attention → (Bamba)
 * RMSNorm with the residual add → gate/up projection with SiLU·mul → down projection. A mixer is the input projection
 * {@code [z | xBC | dt]} → causal conv1d of xBC with SiLU, from and back to the request's window → the state-space
 * scan over each segment (a step of decode rows only takes the one-step update), from and back to its state → gated
 * RMSNorm of y by z → output projection. What every decoder pass shares (temporaries, the final norm and LM head) is
 * {@link DecoderPass}'s.
 */
final class HybridForwardPass extends DecoderPass {
    private final HybridModel model;
    private final HybridConfig cfg;

    HybridForwardPass(HybridModel model, DType activations) {
        super(model.device(), activations, model.config().vocabSize());
        this.model = model;
        this.cfg = model.config();
    }

    @Override
    protected void forward(Tensor tokens, int[] sampleRows, Tensor logits) {
        HybridWeights w = model.weights();
        int n = (int) tokens.dim(0);
        int hidden = cfg.hiddenSize();
        float eps = (float) cfg.normEps();
        RecurrentStateManager states = model.resources().states();
        int[] starts = states.currentStarts();
        Tensor residual = temp(DType.F32, n, hidden);
        ops.embedding(w.embedding(), tokens, residual);
        Tensor normed = temp(act, n, hidden);
        Tensor out = temp(act, n, hidden);
        Mixer mixer = new Mixer(states.current(), decodeOnly(starts), n);
        boolean mlp = cfg.intermediateSize() > 0;
        Tensor mlpOut = mlp ? temp(act, n, hidden) : null;
        Tensor gateUp = mlp ? temp(act, n, 2L * cfg.intermediateSize()) : null;
        Tensor hiddenAct = mlp ? temp(act, n, cfg.intermediateSize()) : null;
        Tensor toAdd = null;
        int stateLayer = 0;
        int kvLayer = 0;
        for (int l = 0; l < cfg.numLayers(); l++) {
            HybridWeights.Layer lw = w.layer(l);
            // the first layer normalises the embeddings; later ones add the previous layer's output first
            ops.rmsNorm(toAdd == null ? residual : toAdd, toAdd == null ? null : residual, lw.inputNorm(), eps, normed);
            if (lw.mixer() != null) {
                mixer.run(lw.mixer(), states.convStates(stateLayer), states.ssmStates(stateLayer), normed, out);
                stateLayer++;
            } else {
                attention(lw.attention(), kvLayer++, normed, out);
            }
            toAdd = out;
            if (lw.mlp() != null) {
                ops.rmsNorm(out, residual, lw.mlpNorm(), eps, normed);
                ops.gateUpActivation(normed, lw.mlp().gateUp(), false, gateUp, hiddenAct);
                ops.matmul(hiddenAct, lw.mlp().down(), null, mlpOut);
                toAdd = mlpOut;
            }
        }
        int[] lastRows = null;
        if (sampleRows != null) {
            lastRows = new int[sampleRows.length];
            for (int i = 0; i < lastRows.length; i++) {
                lastRows[i] = starts[sampleRows[i] + 1] - 1;
            }
        }
        lmHead(residual, toAdd, lastRows, w.finalNorm(), eps, w.lmHead(), logits);
    }

    /** Whether every segment of the step is one token, so the scan is the one-step update. */
    private static boolean decodeOnly(int[] starts) {
        for (int i = 0; i + 1 < starts.length; i++) {
            if (starts[i + 1] - starts[i] != 1) {
                return false;
            }
        }
        return true;
    }

    /** Bamba's attention: fused q/k/v projection, partial RoPE and the KV append in one op, paged attention, o_proj. */
    private void attention(HybridWeights.Attention aw, int kvLayer, Tensor normed, Tensor out) {
        HybridResources res = model.resources();
        int n = (int) normed.dim(0);
        int d = cfg.attentionHeadDim();
        int q = cfg.attentionHeads() * d;
        Tensor qkv = temp(act, n, q + 2L * cfg.kvHeads() * d);
        Tensor qT = temp(act, n, q);
        Tensor attnOut = temp(act, n, q);
        Tensor q3 = qT.reshape(n, cfg.attentionHeads(), d);
        Tensor pos = res.rope().firstIds(LABEL, n);
        RopeParams rope = res.rope().ropeParams();
        res.kv().writeKv(kvLayer, LABEL, n, (pool, layer, pages, offsets) -> ops.qkvProjectionRopeAppend(normed,
                aw.qkv(), null, qkv, pos, rope, pool, layer, pages, offsets, q3));
        res.attention().run(q3, LABEL, kvLayer, res.kv().pool(), attnOut.reshape(n, cfg.attentionHeads(), d));
        ops.matmul(attnOut, aw.o(), null, out);
    }

    /** The Mamba2 mixer of every layer of the step, over one set of temporaries. */
    private final class Mixer {
        private final RecurrentPlan plan;
        private final boolean decode;
        private final Tensor proj;
        private final Tensor xbc;
        private final Tensor y;

        Mixer(RecurrentPlan plan, boolean decode, int n) {
            Mamba2Shape s = cfg.mixer();
            this.plan = plan;
            this.decode = decode;
            this.proj = temp(act, n, s.projWidth());
            this.xbc = temp(act, n, s.convDim());
            this.y = temp(act, n, s.inner());
        }

        void run(HybridWeights.Mixer mw, Tensor convStates, Tensor ssmStates, Tensor normed, Tensor out) {
            Mamba2Shape s = cfg.mixer();
            ops.matmul(normed, mw.inProj(), null, proj);
            ops.causalConv1d(proj, mw.conv(), mw.convBias(), convStates, plan.slotIds(), plan.starts(), s, xbc);
            if (decode) {
                ops.ssmStep(xbc, proj, mw.aLog(), mw.dtBias(), mw.d(), ssmStates, plan.slotIds(), s, y);
            } else {
                ops.ssdScan(xbc, proj, mw.aLog(), mw.dtBias(), mw.d(), ssmStates, plan.slotIds(), plan.starts(), s,
                        y);
            }
            // one group over the whole width, as transformers' torch path normalises (its fused kernels group by B/C)
            ops.gatedRmsNorm(y, proj, mw.norm(), 1, (float) cfg.normEps(), y);
            ops.matmul(y, mw.outProj(), null, out);
        }
    }
}
