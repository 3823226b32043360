package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.ModelConfig;
import org.mstar.resources.Segment;

/**
 * What every decoder forward over a planned step shares: logits of the sampled rows or of every row, the
 * temporaries a pass allocates (freed when it ends, or handed to a recorded graph), and the LM head on each sampled
 * sequence's last token. Subclasses run the layers ({@link #forward}).
 */
abstract class DecoderPass {
    protected static final String LABEL = Segment.MAIN;

    protected final LlamaModel model;
    protected final ModelConfig cfg;
    protected final Device device;
    protected final ComputeOps ops;
    protected final DType act;
    /** Tensors freed when the pass ends (or handed to a recorded graph); collaborators may add theirs. */
    protected final List<Tensor> temporaries = new ArrayList<>();

    DecoderPass(LlamaModel model, DType activations) {
        this.model = model;
        this.cfg = model.config();
        this.device = model.device();
        this.ops = device.ops();
        this.act = activations;
    }

    /** Logits {@code [sampleRows.length, vocab]} of the sampled rows; temporaries are freed when the pass ends. */
    Tensor run(Tensor tokens, int[] sampleRows) {
        Tensor logits = device.allocate(DType.F32, sampleRows.length, cfg.vocabSize());
        try {
            forward(tokens, sampleRows, logits);
            return logits;
        } catch (RuntimeException e) {
            logits.close();
            throw e;
        } finally {
            temporaries.forEach(Tensor::close);
        }
    }

    /**
     * Logits of every row into {@code logits} (each row its own sequence's last token, as in decode). The
     * temporaries go to {@code held} instead of being freed: recorded graph work addresses them on replay.
     */
    void runAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        try {
            forward(tokens, null, logits);
        } finally {
            held.addAll(temporaries);
        }
    }

    /** @param sampleRows null for every row in order (no gather) */
    protected abstract void forward(Tensor tokens, int[] sampleRows, Tensor logits);

    /**
     * The final norm and LM head into {@code logits}: over the last layer's output added to the residual stream, at
     * each sampled sequence's last token ({@code sampleRows} indexes the step's segments; null: every row).
     */
    protected void lmHead(Tensor residual, Tensor layerOut, int[] sampleRows, Tensor logits) {
        Tensor lastResidual = residual;
        Tensor lastOut = layerOut;
        int m = (int) residual.dim(0);
        int hidden = cfg.hiddenSize();
        if (sampleRows != null) {
            m = sampleRows.length;
            int[] last = model.resources().attention().lastRows(LABEL);
            int[] rows = new int[m];
            for (int i = 0; i < m; i++) {
                rows[i] = last[sampleRows[i]];
            }
            Tensor rowIdx = track(device.fromInts(rows, m));
            lastResidual = temp(DType.F32, m, hidden);
            lastOut = temp(act, m, hidden);
            ops.gatherRows(residual, rowIdx, lastResidual);
            ops.gatherRows(layerOut, rowIdx, lastOut);
        }
        Tensor finalHidden = temp(act, m, hidden);
        ops.rmsNorm(lastOut, lastResidual, model.weights().finalNorm(), (float) cfg.rmsNormEps(), finalHidden);
        ops.matmul(finalHidden, model.weights().lmHead(), null, logits);
    }

    protected Tensor temp(DType dtype, long... shape) {
        return track(device.allocate(dtype, shape));
    }

    protected Tensor track(Tensor t) {
        temporaries.add(t);
        return t;
    }
}
