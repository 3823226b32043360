package org.mstar.model.llama;

import java.util.List;
import java.util.stream.IntStream;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.device.UnsupportedOnDeviceException;
import org.mstar.model.LatentAttention;

/**
 * One layer's latent attention rearranged for prefill chunks, where attention runs per head over up-projected keys
 * and values (as transformers computes it) instead of in the latent space: a prompt's keys are few against its
 * queries, so up-projecting them costs less than attending 576-value rows per query. Every head gets {@code headDim}
 * dims (the rope part, then the nope part, then zeros; values then zeros), a head dim the device's ragged attention
 * runs, and the padding lives in the weights, so the chunk is plain matmuls, RoPE over the first dims and one ragged
 * attention:
 * <ul>
 *   <li>{@code q [Hq·D, in]}: q_proj's (or q_b_proj's) rows of each head reordered to rope part first, then zeros;</li>
 *   <li>{@code k [Hq·D, R + Dr]} over a latent row (normalised latent, rotated rope key): per head an identity
 *       that copies the shared rope key, then kv_b_proj's key rows over the latent, then zeros;</li>
 *   <li>{@code v [Hq·D, R + Dr]}: kv_b_proj's value rows over the latent, then zeros;</li>
 *   <li>{@code o [H, Hq·D]}: o_proj's columns of each head, then zero columns for the padding.</li>
 * </ul>
 * A key's dot product with a query is unchanged by the reordering and the zeros, and the identity rows copy the rope
 * key exactly (a product by 1, summed with zeros).
 *
 * @param headDim the padded head dim D
 */
public record LatentPrefillWeights(Tensor q, Tensor k, Tensor v, Tensor o, int headDim) {
    /** Head dims tried, smallest first, when the device's ragged attention refuses the exact one. */
    private static final int[] PADDED_HEAD_DIMS = {64, 80, 96, 128, 192, 256};

    /**
     * The rearranged weights of {@code w}, or null when the device runs no ragged attention wide enough or a weight is
     * not a plain tensor (FP8 weights keep the absorbed form).
     */
    static LatentPrefillWeights derive(LatentAttentionWeights w, LatentAttention mla, int heads, Device device,
                                       DType dtype, List<Tensor> owned) {
        Tensor qSource = w.qProj() != null ? w.qProj() : w.qBProj();
        if (qSource instanceof Fp8Weight || w.oProj() instanceof Fp8Weight) {
            return null;
        }
        int d = headDim(mla, device, dtype);
        if (d < 0) {
            return null;
        }
        int dn = mla.qkNopeHeadDim();
        int dr = mla.qkRopeHeadDim();
        int dv = mla.vHeadDim();
        int r = mla.kvLoraRank();
        int width = r + dr;
        int qIn = (int) qSource.dim(1);
        int hidden = (int) w.oProj().dim(0);
        float[] qw = device.toFloats(qSource);
        float[] kvb = device.toFloats(w.kvBProj());
        float[] ow = device.toFloats(w.oProj());
        float[] q = new float[heads * d * qIn];
        float[] k = new float[heads * d * width];
        float[] v = new float[heads * d * width];
        float[] o = new float[hidden * heads * d];
        for (int h = 0; h < heads; h++) {
            int src = h * (dn + dr);
            System.arraycopy(qw, (src + dn) * qIn, q, h * d * qIn, dr * qIn);
            System.arraycopy(qw, src * qIn, q, (h * d + dr) * qIn, dn * qIn);
            for (int i = 0; i < dr; i++) {
                k[(h * d + i) * width + r + i] = 1f;
            }
            for (int j = 0; j < dn; j++) {
                System.arraycopy(kvb, (h * (dn + dv) + j) * r, k, (h * d + dr + j) * width, r);
            }
            for (int j = 0; j < dv; j++) {
                System.arraycopy(kvb, (h * (dn + dv) + dn + j) * r, v, (h * d + j) * width, r);
            }
            for (int row = 0; row < hidden; row++) {
                System.arraycopy(ow, (row * heads + h) * dv, o, row * heads * d + h * d, dv);
            }
        }
        LatentPrefillWeights p = new LatentPrefillWeights(device.fromFloats(q, dtype, (long) heads * d, qIn),
                device.fromFloats(k, dtype, (long) heads * d, width), device.fromFloats(v, dtype, (long) heads * d, width),
                device.fromFloats(o, dtype, hidden, (long) heads * d), d);
        owned.addAll(List.of(p.q, p.k, p.v, p.o));
        return p;
    }

    /** The smallest head dim holding the rope and nope parts, and the value, that the device's ragged attention runs. */
    private static int headDim(LatentAttention mla, Device device, DType dtype) {
        int needed = Math.max(mla.qkHeadDim(), mla.vHeadDim());
        return IntStream.concat(IntStream.of(needed), IntStream.of(PADDED_HEAD_DIMS).filter(x -> x > needed))
                .filter(x -> runs(device, x, dtype)).findFirst().orElse(-1);
    }

    private static boolean runs(Device device, int headDim, DType dtype) {
        try {
            device.ops().requireRaggedAttentionHeadDim(headDim, dtype);
            return true;
        } catch (UnsupportedOnDeviceException e) {
            return false;
        }
    }
}
