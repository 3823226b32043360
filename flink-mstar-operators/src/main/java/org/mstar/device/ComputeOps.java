package org.mstar.device;

/**
 * Every compute op a model forward and the resources need, enqueued on the owning device's stream.
 * Two implementations: {@code org.mstar.device.cpu} (the readable reference, the CI path) and
 * {@code org.mstar.device.cuda}. All tensors of one call live on the same device.
 *
 * <p>Activations may be F32 or BF16 (outputs take the dtype of the {@code out} tensor); weights F32,
 * BF16 or F16. Arithmetic accumulates in fp32 and rounds once on store.
 *
 * <p>The KV pool is one tensor {@code [layers, pages, 2, pageSize, kvHeads, headDim]} (index 0 of the
 * third axis is K, 1 is V).
 */
public interface ComputeOps {

    /** {@code out[i, :] = table[ids[i], :]}; table {@code [vocab, hidden]}, ids I32 {@code [n]}. */
    void embedding(Tensor table, Tensor ids, Tensor out);

    /**
     * RMSNorm over the last dim: {@code out = x / sqrt(mean(x²) + eps) * weight}; {@code out} may be {@code x} when
     * there is no residual (per-head q/k norms run in place over {@code [n·heads, headDim]}). With a non-null
     * {@code residual} (fused add, F32 or the activation dtype) it first does {@code residual += x} and
     * normalises the sum: {@code out = norm(residual)}.
     */
    void rmsNorm(Tensor x, Tensor residual, Tensor weight, float eps, Tensor out);

    /**
     * {@code out[n, N] = x[n, K] · wᵀ + bias}, with {@code w} {@code [N, K]} (one row per output, as in a
     * Hugging Face Linear) and {@code bias} {@code [N]} or null.
     */
    void matmul(Tensor x, Tensor w, Tensor bias, Tensor out);

    /**
     * Split the columns of a fused projection {@code qkv [n, Q + K + V]} into contiguous
     * {@code q [n, Q] = qkv[:, :Q]}, {@code k [n, K] = qkv[:, Q:Q+K]} and {@code v [n, V] = qkv[:, Q+K:]};
     * the widths come from the outputs (any shape of n rows). Equal dtypes copy exactly; otherwise values
     * round once to each output's dtype.
     */
    void splitQkv(Tensor qkv, Tensor q, Tensor k, Tensor v);

    /** {@code out = a + b}, elementwise, same shapes. */
    void add(Tensor a, Tensor b, Tensor out);

    /** {@code out[n, I] = silu(gateUp[n, :I]) * gateUp[n, I:]}. */
    void siluMul(Tensor gateUp, Tensor out);

    /**
     * {@code out[n, I] = geluTanh(gateUp[n, :I]) * gateUp[n, I:]}, with PyTorch's tanh approximation
     * {@code geluTanh(x) = 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))} (Gemma's MLP).
     */
    void geluTanhMul(Tensor gateUp, Tensor out);

    /** {@code out = x · factor}, elementwise, same sizes; {@code out} may be {@code x}. */
    void scale(Tensor x, float factor, Tensor out);

    // ---- Encoder ops (Whisper and other encoder-decoder models): LayerNorm, exact GELU, conv1d ----

    /**
     * LayerNorm over the last dim, as PyTorch's {@code nn.LayerNorm}: {@code out = (x − mean) / sqrt(var + eps) ·
     * weight + bias} with the biased variance of each row; {@code bias} may be null (no shift). {@code out} may be
     * {@code x} when there is no residual. With a non-null {@code residual} it first does {@code residual += x},
     * rounded to the residual's dtype, and normalises the sum ({@code out = norm(residual)}), as {@link #rmsNorm}
     * does. weight and bias {@code [hidden]}; x, residual and out {@code [rows, hidden]} (any leading shape).
     */
    void layerNorm(Tensor x, Tensor residual, Tensor weight, Tensor bias, float eps, Tensor out);

    /**
     * Exact (erf) GELU, elementwise: {@code out = x · Φ(x) = 0.5 · x · (1 + erf(x / √2))}, PyTorch's
     * {@code gelu(approximate="none")} and Hugging Face's {@code "gelu"} activation (not the tanh form of
     * {@link #geluTanhMul}). Same sizes; {@code out} may be {@code x}.
     */
    void gelu(Tensor x, Tensor out);

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

    // ---- end of encoder ops ----

    // ---- Decode fusions ----

    /**
     * The gate/up projection and its gated activation in one op: {@code out[n, I] = act(x · gateᵀ) · (x · upᵀ)}
     * with {@code gateUpWeight [2I, K]} (gate rows, then up rows, as the fused MLP weight stores them) and act
     * SiLU, or PyTorch's tanh-approximated GELU when {@code geluTanh} is set. Equal to {@link #matmul} into
     * {@code gateUp [n, 2I]} (out's dtype) followed by {@link #siluMul} or {@link #geluTanhMul}: the gate and up sums
     * are rounded to out's dtype before the activation. {@code gateUp} is the caller's buffer for that intermediate;
     * a device may skip it (CUDA can for a few rows, where the activation's own launch costs as much as its work),
     * so its contents afterwards are unspecified.
     */
    void gateUpActivation(Tensor x, Tensor gateUpWeight, boolean geluTanh, Tensor gateUp, Tensor out);

    /**
     * The fused qkv projection and {@link #qkvRopeAppend} in one op: equal to {@link #matmul} of {@code x [n, K]}
     * with {@code qkvWeight [(qHeads + 2·kvHeads)·headDim, K]} and {@code qkvBias} (or null) into
     * {@code qkv [n, (qHeads + 2·kvHeads)·headDim]}, followed by {@link #qkvRopeAppend} of it with the same
     * arguments. {@code qkv} is the caller's buffer for that intermediate; a device may skip it (CUDA can for a few
     * rows), so its contents afterwards are unspecified.
     */
    void qkvProjectionRopeAppend(Tensor x, Tensor qkvWeight, Tensor qkvBias, Tensor qkv, Tensor posIds,
            RopeParams params, Tensor pool, int layer, Tensor pageIdx, Tensor offsets, Tensor q);

    // ---- end of decode fusions ----

    /**
     * Rotate {@code q [n, qHeads, headDim]} and {@code k [n, kHeads, headDim]} in place at positions
     * {@code posIds} (I32 {@code [n]}), as {@link RopeParams} defines. Angles are computed as
     * {@code pos · invFreq} in fp32 from the fp32-rounded table.
     */
    void rope(Tensor q, Tensor k, Tensor posIds, RopeParams params);

    /**
     * Write token i's K and V ({@code [n, kvHeads, headDim]}) into {@code pool[layer, pageIdx[i], 0|1,
     * offsets[i]]}. Index tensors are I32 {@code [n]}.
     */
    void kvAppend(Tensor pool, int layer, Tensor k, Tensor v, Tensor pageIdx, Tensor offsets);

    /**
     * The fused {@link #splitQkv} → {@link #rope} → {@link #kvAppend} of one layer (one pass instead of three
     * small kernels): from {@code qkv [n, (qHeads + 2·kvHeads)·headDim]} it writes the rotated q to
     * {@code q [n, qHeads, headDim]} and the rotated k and the v straight into {@code pool[layer, pageIdx[i],
     * 0|1, offsets[i]]}; kvHeads and headDim come from the pool. Equal, element for element, to splitting
     * into {@code q} and into k and v of qkv's dtype, rotating q and k at {@code posIds} (I32 {@code [n]})
     * and appending k and v. Index tensors are I32 {@code [n]}.
     */
    void qkvRopeAppend(Tensor qkv, Tensor posIds, RopeParams params, Tensor pool, int layer, Tensor pageIdx,
            Tensor offsets, Tensor q);

    /**
     * Paged attention of {@code q [totalQo, qoHeads, headDim]} against layer {@code layer} of the pool,
     * as {@code plan} lays it out; grouped-query heads map query head h to KV head
     * {@code h / (qoHeads / kvHeads)}. Writes {@code out [totalQo, qoHeads, headDim]}.
     */
    void pagedAttention(Tensor q, Tensor pool, int layer, PagedAttentionPlan plan, Tensor out);

    /**
     * Refuses a head dim {@link #pagedAttention} cannot run with a KV pool of {@code dtype}, so a model is rejected
     * where it is built instead of at its first step. Every head dim by default.
     *
     * @throws UnsupportedOnDeviceException naming the head dims this device runs
     */
    default void requireAttentionHeadDim(int headDim, DType dtype) {
    }

    /** {@code out[j, :] = x[rows[j], :]}, rows I32 {@code [m]}. */
    void gatherRows(Tensor x, Tensor rows, Tensor out);

    /** {@code out[r] = argmax(logits[r, :])}, lowest index on ties; out I32 {@code [rows]}. */
    void argmax(Tensor logits, Tensor out);

    /**
     * Structured output's mask, in place: {@code logits[r, v] = -inf} unless bit {@code v & 31} of
     * {@code allowed[r, v >>> 5]} is set. Logits F32 {@code [rows, vocab]}; allowed I32
     * {@code [rows, ceil(vocab / 32)]}, bits past the vocabulary ignored.
     */
    void maskLogits(Tensor logits, Tensor allowed);

    /** Steps 1-6 of the sampling pipeline ({@link SamplingBatch}): logits F32 {@code [rows, vocab]} → probs F32. */
    void samplingProbs(Tensor logits, SamplingBatch batch, Tensor probs);

    /**
     * Step 7: draw one token per row from {@code probs} with the canonical {@link ProbabilitySampler}
     * rule and Philox uniforms keyed by {@code seeds[r]} at counter {@code offsets[r]} (both I64).
     */
    void sampleFromProbs(Tensor probs, Tensor seeds, Tensor offsets, Tensor out);

    /** Copy whole pages {@code src[i] → dst[i]} in every layer, K and V (I32 index tensors). */
    void copyPages(Tensor pool, Tensor src, Tensor dst);

    /** {@code out [layers, n, 2, pageSize, kvHeads, headDim] = pool[:, pages[i]]}. */
    void gatherPages(Tensor pool, Tensor pages, Tensor out);

    /** Inverse of {@link #gatherPages}: {@code pool[:, pages[i]] = in[:, i]}. */
    void scatterPages(Tensor pool, Tensor pages, Tensor in);

    // ---------------------------------------------------------------- ragged (cacheless) attention

    /**
     * Varlen attention with no KV cache: span r of {@code plan} attends queries {@code q[qIndptr[r] ..
     * qIndptr[r+1])} against keys and values {@code k, v[kvIndptr[r] .. kvIndptr[r+1])} under the plan's mask
     * ({@link RaggedAttentionPlan}). q {@code [≥ totalQ, qoHeads, headDim]}, k and v {@code [≥ totalKv, kvHeads,
     * headDim]}, out of q's shape and dtype; grouped-query heads map query head h to KV head
     * {@code h / (qoHeads / kvHeads)}. Rows of {@code out} past {@code totalQ} are not written.
     */
    void raggedAttention(Tensor q, Tensor k, Tensor v, RaggedAttentionPlan plan, Tensor out);

    /**
     * Refuses a head dim {@link #raggedAttention} cannot run in {@code dtype}, so a model is rejected where it is
     * built. Every head dim by default.
     *
     * @throws UnsupportedOnDeviceException naming the head dims this device runs
     */
    default void requireRaggedAttentionHeadDim(int headDim, DType dtype) {
    }

    // ---------------------------------------------------------------- frame streams (ring KV)

    /**
     * Attention of frames over a ring layer buffer {@code ring [rows, 2, kvHeads, headDim]}: query rows of
     * frame s ({@code q [totalQo, qoHeads, headDim]}) attend the buffer rows {@code plan} lists for it, all of
     * them (a frame sees itself whole, and its session's visible history); grouped-query heads map query head
     * h to KV head {@code h / (qoHeads / kvHeads)}. Scores {@code smScale · (q · k)}, softmax in fp32. Writes
     * {@code out [totalQo, qoHeads, headDim]}.
     */
    void ringAttention(Tensor q, Tensor ring, RingAttentionPlan plan, Tensor out);

    /**
     * Write token i's K and V ({@code [n, kvHeads, headDim]}) into rows {@code rows[i]} (I32 {@code [n]}) of a ring
     * layer buffer {@code [rows, 2, kvHeads, headDim]}: index 0 of the second axis takes K, 1 takes V.
     */
    void ringAppend(Tensor k, Tensor v, Tensor ring, Tensor rows);
}
