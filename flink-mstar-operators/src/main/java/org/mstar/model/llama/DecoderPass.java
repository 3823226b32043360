package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.List;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.Segment;

/**
 * What every decoder forward over a planned step shares, whatever its layers (Llama's and DeepSeek-V2's here, the
 * state-space hybrids' in {@code org.mstar.model.mamba}): logits of the sampled rows or of every row, the temporaries
 * a pass allocates (freed when it ends, or handed to a recorded graph), and the final norm and LM head on each sampled
 * sequence's last token. Subclasses run the layers ({@link #forward}).
 */
public abstract class DecoderPass {
    protected static final String LABEL = Segment.MAIN;

    protected final Device device;
    protected final ComputeOps ops;
    protected final DType act;
    /** Tensors freed when the pass ends (or handed to a recorded graph); collaborators may add theirs. */
    protected final List<Tensor> temporaries = new ArrayList<>();
    private final int vocabSize;

    protected DecoderPass(Device device, DType activations, int vocabSize) {
        this.device = device;
        this.ops = device.ops();
        this.act = activations;
        this.vocabSize = vocabSize;
    }

    /** Logits {@code [sampleRows.length, vocab]} of the sampled rows; temporaries are freed when the pass ends. */
    public Tensor run(Tensor tokens, int[] sampleRows) {
        Tensor logits = device.allocate(DType.F32, sampleRows.length, vocabSize);
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
    public void runAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        try {
            forward(tokens, null, logits);
        } finally {
            held.addAll(temporaries);
        }
    }

    /** @param sampleRows indexes of the step's segments whose last token gets logits; null for every row in order */
    protected abstract void forward(Tensor tokens, int[] sampleRows, Tensor logits);

    /**
     * The final norm and LM head into {@code logits}: over the last layer's output added to the residual stream, at
     * the rows {@code lastRows} (each sampled sequence's last token; null: every row).
     */
    protected void lmHead(Tensor residual, Tensor layerOut, int[] lastRows, Tensor finalNorm, float eps,
                          Tensor lmHead, Tensor logits) {
        Tensor lastResidual = residual;
        Tensor lastOut = layerOut;
        long m = residual.dim(0);
        long hidden = residual.dim(1);
        if (lastRows != null) {
            m = lastRows.length;
            Tensor rowIdx = track(device.fromInts(lastRows, lastRows.length));
            lastResidual = temp(DType.F32, m, hidden);
            lastOut = temp(act, m, hidden);
            ops.gatherRows(residual, rowIdx, lastResidual);
            ops.gatherRows(layerOut, rowIdx, lastOut);
        }
        Tensor finalHidden = temp(act, m, hidden);
        ops.rmsNorm(lastOut, lastResidual, finalNorm, eps, finalHidden);
        ops.matmul(finalHidden, lmHead, null, logits);
    }

    protected Tensor temp(DType dtype, long... shape) {
        return track(device.allocate(dtype, shape));
    }

    protected Tensor track(Tensor t) {
        temporaries.add(t);
        return t;
    }
}
