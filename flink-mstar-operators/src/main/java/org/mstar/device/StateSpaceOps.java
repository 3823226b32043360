package org.mstar.device;

/**
 * The ops of a Mamba2 mixer (transformers' {@code Mamba2Mixer} and {@code BambaMixer}), over a batch of segments
 * whose tokens lie back to back: segment {@code i} is tokens {@code [starts[i], starts[i+1])} of a request whose
 * recurrent state is row {@code slots[i]} of the state tensors, which each op reads first and leaves as the state
 * after the segment's tokens. One family of {@link ComputeOps}.
 *
 * <p>Common arguments: {@code proj} the input projection {@code [tokens, shape.projWidth()]}, read at its column
 * ranges ({@link Mamba2Shape}); {@code slots} I32 {@code [segments]}; {@code starts} I32 {@code [segments + 1]},
 * from 0 to the token count. Arithmetic is fp32 whatever the tensors' dtypes; each output is rounded once on store.
 * Two segments of one call never share a slot, except capture padding rows on the scratch slot, whose outputs and
 * state are garbage by design.
 */
public interface StateSpaceOps {

    /**
     * Causal depthwise convolution over xBC, continuing from each segment's stored window, then SiLU, as
     * transformers' {@code act(conv1d(xBC))} (prefill) and {@code causal_conv1d_update} (one token):
     * {@code xbc[t, c] = silu(bias[c] + Σ_j weight[c, j] · in[t − K + 1 + j, c])} with {@code in} the segment's xBC
     * columns of {@code proj}, preceded by the window. Leaves in {@code convStates[slot]} the segment's last
     * {@code K − 1} inputs, oldest first. weight {@code [convDim, K]}, bias {@code [convDim]} or null, convStates
     * {@code [slots, convDim, K − 1]}, xbc {@code [tokens, convDim]}.
     */
    void causalConv1d(Tensor proj, Tensor weight, Tensor bias, Tensor convStates, Tensor slots, Tensor starts,
                      Mamba2Shape shape, Tensor xbc);

    /**
     * Mamba2's state-space scan (SSD) over prefill chunks, continuing from {@code ssmStates[slot]}: per head, with
     * {@code dt = clamp(softplus(dtRaw + dtBias), dtMin, dtMax)} and {@code A = −exp(aLog)}, the recurrence
     * {@code h_t = exp(dt_t·A)·h_{t−1} + dt_t·x_t ⊗ B_t}, {@code y_t = h_t·C_t + D·x_t}, computed chunk by chunk
     * (within a chunk as the quadratic form, across chunks through the state) and leaving the last state in the
     * slot. xbc {@code [tokens, convDim]} (after {@link #causalConv1d}); aLog, dtBias, d {@code [heads]};
     * ssmStates {@code [slots, heads, headDim, stateDim]}; y {@code [tokens, inner]}.
     */
    void ssdScan(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                 Tensor starts, Mamba2Shape shape, Tensor y);

    /**
     * The decode step of {@link #ssdScan}: one token per row, row {@code i} at {@code slots[i]}, as transformers'
     * cached single step: {@code h = h·exp(dt·A) + dt·B·x}, {@code y = h·C + D·x}. Shapes as {@link #ssdScan},
     * with {@code tokens = slots.size}.
     */
    void ssmStep(Tensor xbc, Tensor proj, Tensor aLog, Tensor dtBias, Tensor d, Tensor ssmStates, Tensor slots,
                 Mamba2Shape shape, Tensor y);

    /**
     * Mamba2's gated RMSNorm, gate first ({@code norm_before_gate=False}): {@code v = y · silu(z)}, each of
     * {@code groups} equal column groups of v normalised by its own root mean square, times {@code weight}. z is
     * the first {@code inner} columns of {@code gate}'s rows (the projection's z). y and out {@code [rows, inner]}
     * ({@code out} may be {@code y}), weight {@code [inner]}.
     */
    void gatedRmsNorm(Tensor y, Tensor gate, Tensor weight, int groups, float eps, Tensor out);
}
