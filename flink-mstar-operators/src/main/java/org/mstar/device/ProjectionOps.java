package org.mstar.device;

import java.util.List;

/**
 * Dense projections and row moves: embedding lookups, matmuls (plain and 1-D convolution), splitting a fused
 * projection, gathering rows. One family of {@link ComputeOps}.
 */
public interface ProjectionOps {

    /** {@code out[i, :] = table[ids[i], :]}; table {@code [vocab, hidden]}, ids I32 {@code [n]}. */
    void embedding(Tensor table, Tensor ids, Tensor out);

    /**
     * {@code out[n, N] = x[n, K] · wᵀ + bias}, with {@code w} {@code [N, K]} (one row per output, as in a
     * Hugging Face Linear) and {@code bias} {@code [N]} or null. {@code w} may be an {@link Fp8Weight}: the result
     * is then the product with its dequantised values (code × scale in fp32), which the device may compute at its own
     * precision (bf16 operands on a GPU). A weight that {@link Fp8Weight#quantisesActivations() quantises
     * activations} (W8A8) multiplies x quantised per row ({@link Fp8Rows#quantise}) and dequantised (code × row
     * scale in fp32); x may then be {@link Fp8Rows} already (from {@link #quantizeRows}, or a norm or activation that
     * wrote them), which only such a weight takes. The GPU multiplies the FP8 codes on its tensor cores and applies
     * both scales to the fp32 sums.
     */
    void matmul(Tensor x, Tensor w, Tensor bias, Tensor out);

    /**
     * Quantises each row of {@code x} {@code [rows, K]} (F32 or BF16) to FP8 with its own scale, as
     * {@link Fp8Rows#quantise} defines it.
     */
    void quantizeRows(Tensor x, Fp8Rows out);

    /**
     * Split the columns of a fused projection {@code qkv [n, Q + K + V]} into contiguous
     * {@code q [n, Q] = qkv[:, :Q]}, {@code k [n, K] = qkv[:, Q:Q+K]} and {@code v [n, V] = qkv[:, Q+K:]};
     * the widths come from the outputs (any shape of n rows). Equal dtypes copy exactly; otherwise values
     * round once to each output's dtype.
     */
    void splitQkv(Tensor qkv, Tensor q, Tensor k, Tensor v);

    /** {@code out[j, :] = x[rows[j], :]}, rows I32 {@code [m]}. */
    void gatherRows(Tensor x, Tensor rows, Tensor out);

    /**
     * Batched LoRA: adds each row's own adapter's low-rank update to columns {@code [outCol, outCol + N)} of a
     * projection's output, {@code out[i, outCol + j] += scales[s] · Σ_r (Σ_c x[i, c] · a[s, r, c]) · b[s, j, r]}
     * with {@code s = slots[i]}; a row whose slot is negative is left as it is. The adapters are stacked by slot:
     * {@code a [S, R, K]} and {@code b [S, N, R]} (an adapter of a lower rank padded with zeros), {@code scales}
     * F32 {@code [S]}, {@code slots} I32 {@code [n]}, x {@code [n, K]}, out {@code [n, W]} with
     * {@code outCol + N <= W}. The slots are a tensor, not launch arguments, so a recorded graph serves any mix of
     * adapters. Both sums accumulate in fp32 (the rank-sized intermediate stays fp32), and each output is rounded
     * to out's dtype once.
     */
    void addLora(Tensor x, Tensor a, Tensor b, Tensor scales, Tensor slots, Tensor out, int outCol);

    /**
     * {@link #addLora} of several modules that read the same input {@code x} and write disjoint columns of
     * {@code out} (q, k and v of a fused qkv output; gate and up): module {@code g}'s stacks {@code a.get(g)},
     * {@code b.get(g)} into the columns from {@code outCols[g]}, as {@code addLora} of each in turn computes them. A
     * device may serve them in fewer launches; at most {@value #LORA_GROUP} modules.
     */
    default void addLoraGroup(Tensor x, List<Tensor> a, List<Tensor> b, Tensor scales, Tensor slots, Tensor out,
                              int[] outCols) {
        checkLoraGroup(a, b, outCols);
        for (int g = 0; g < a.size(); g++) {
            addLora(x, a.get(g), b.get(g), scales, slots, out, outCols[g]);
        }
    }

    /** Modules one {@link #addLoraGroup} call serves at most: q, k and v. */
    int LORA_GROUP = 3;

    /** Refuses an {@link #addLoraGroup} call whose lists and columns do not pair up one to one. */
    static void checkLoraGroup(List<Tensor> a, List<Tensor> b, int[] outCols) {
        if (a.isEmpty() || a.size() > LORA_GROUP || b.size() != a.size() || outCols.length != a.size()) {
            throw new IllegalArgumentException("addLoraGroup takes 1 to " + LORA_GROUP + " modules, each with a, b and "
                    + "an output column; got " + a.size() + " a, " + b.size() + " b and " + outCols.length + " columns");
        }
    }

    /**
     * 1-D convolution over frames, frames-major so that its output feeds row-wise ops and matmuls directly:
     * {@code out[t, o] = bias[o] + Σ_c Σ_k weight[o, c, k] · x[t·stride + k − padding, c]}, zero outside the
     * input. x {@code [frames, inChannels]} (the transpose of PyTorch's {@code [channels, frames]}); weight
     * {@code [outChannels, inChannels, kernel]} as PyTorch's {@code nn.Conv1d} stores it; bias
     * {@code [outChannels]} or null; out {@code [(frames + 2·padding − kernel) / stride + 1, outChannels]}.
     * Sums accumulate in fp32 and round once on store, as {@link #matmul} does.
     */
    void conv1d(Tensor x, Tensor weight, Tensor bias, int stride, int padding, Tensor out);

    /**
     * The frames {@link #conv1d} writes: {@code (frames + 2·padding − kernel) / stride + 1} (Whisper's stem: 3000
     * mel frames → 3000 after conv1, 1500 after conv2).
     *
     * @throws IllegalArgumentException for a stride below 1, a negative padding or an input shorter than the kernel
     */
    static int conv1dOutFrames(long frames, long kernel, int stride, int padding) {
        if (stride < 1 || padding < 0 || kernel < 1) {
            throw new IllegalArgumentException("conv1d needs stride >= 1, padding >= 0 and a kernel >= 1, got stride "
                    + stride + ", padding " + padding + ", kernel " + kernel);
        }
        long span = frames + 2L * padding - kernel;
        if (span < 0) {
            throw new IllegalArgumentException("conv1d: " + frames + " frames padded by " + padding
                    + " are shorter than the kernel " + kernel);
        }
        return Math.toIntExact(span / stride + 1);
    }
}
