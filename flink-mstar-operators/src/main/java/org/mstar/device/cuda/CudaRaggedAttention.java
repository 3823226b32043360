package org.mstar.device.cuda;

import java.util.Arrays;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.UnsupportedOnDeviceException;

/**
 * Ragged (cacheless) attention launchers (attention_ragged.cu). bf16 at the tensor-core head dims runs the
 * tensor-core body of the paged prefill kernel over contiguous spans (block = (tile of packed (query, grouped
 * head) rows, KV head, span); off on a device whose options have {@code tensorCorePrefill} off). fp32, the other bf16
 * head dims and the switched-off case run the CUDA-core kernel: block (query tile, query head, span) walks the
 * keys its tile's queries may see in tiles staged through shared memory, with an online softmax per query row
 * in fp32. On Hopper, with {@code warpgroupAttention} on, bf16 at head dims 128 and 192 runs the warpgroup kernel
 * instead ({@link WarpgroupAttention}). The grid's x extent comes from the plan's {@code maxQLen}, which must bound every span's query count.
 */
final class CudaRaggedAttention {
    private static final int THREADS = 128;
    private static final int QUERY_TILE = 32;
    private static final int KEY_TILE = 32;
    /** Head dims of the CUDA-core kernel, fp32 and bf16 (MSTAR_RAGGED). */
    static final List<Integer> HEAD_DIMS = List.of(32, 64, 128, 256);
    /** Head dims of the bf16 tensor-core kernel (MSTAR_RAGGED_MMA); 80, 96 and 192 run only there. */
    static final List<Integer> MMA_HEAD_DIMS = List.of(64, 80, 96, 128, 192, 256);

    private final CudaDevice device;

    CudaRaggedAttention(CudaDevice device) {
        this.device = device;
    }

    void run(CudaTensor q, CudaTensor k, CudaTensor v, RaggedAttentionPlan plan, CudaTensor out) {
        if (q.rank() != 3 || k.rank() != 3 || !Arrays.equals(k.shape(), v.shape()) || q.dim(2) != k.dim(2)) {
            throw new IllegalArgumentException("raggedAttention: q " + q + " needs [n, qoHeads, headDim] and k " + k
                    + ", v " + v + " one [m, kvHeads, headDim] shape");
        }
        if (!Arrays.equals(out.shape(), q.shape())) {
            throw new IllegalArgumentException("raggedAttention: out " + out + " must have q's shape " + q);
        }
        if (q.dtype() != k.dtype() || k.dtype() != v.dtype() || out.dtype() != q.dtype()) {
            throw new IllegalArgumentException("raggedAttention: q, k, v and out must share one dtype, got " + q + ", "
                    + k + ", " + v + ", " + out);
        }
        int qoHeads = (int) q.dim(1);
        int kvHeads = (int) k.dim(1);
        int headDim = (int) q.dim(2);
        if (qoHeads % kvHeads != 0) {
            throw new IllegalArgumentException("raggedAttention: " + qoHeads + " query heads do not group over "
                    + kvHeads + " KV heads");
        }
        if (plan.totalQ() > q.dim(0) || plan.totalKv() > k.dim(0)) {
            throw new IllegalArgumentException("raggedAttention: plan packs " + plan.totalQ() + " queries and "
                    + plan.totalKv() + " keys, q has " + q.dim(0) + " rows and k " + k.dim(0));
        }
        String type = switch (q.dtype()) {
            case F32 -> "f32";
            case BF16 -> "bf16";
            default -> throw new IllegalArgumentException("raggedAttention supports F32 and BF16, got " + q.dtype());
        };
        requireHeadDim(headDim, q.dtype());
        if (plan.rows() == 0 || plan.maxQLen() == 0) {
            return;
        }
        CudaTensor qIndptr = CudaTensor.of(plan.qIndptr(), "plan.qIndptr");
        CudaTensor kvIndptr = CudaTensor.of(plan.kvIndptr(), "plan.kvIndptr");
        KernelArgs args = new KernelArgs().tensor(q).tensor(k).tensor(v).tensor(qIndptr).tensor(kvIndptr).i32(qoHeads)
                .i32(kvHeads).i32(plan.causalBlock()).f32(plan.smScale()).tensor(out);
        boolean mma = q.dtype() == DType.BF16 && MMA_HEAD_DIMS.contains(headDim)
                && (device.options().tensorCorePrefill() || !HEAD_DIMS.contains(headDim));
        if (mma && WarpgroupAttention.serves(device, WarpgroupAttention.RAGGED_HEAD_DIMS, headDim)) {
            device.kernel("attn_ragged_wgmma_bf16_d" + headDim).launch(device.stream(),
                    WarpgroupAttention.tiles(plan.maxQLen(), qoHeads / kvHeads), kvHeads, plan.rows(),
                    WarpgroupAttention.THREADS, WarpgroupAttention.smemBytes(headDim), args,
                    "raggedAttention (warpgroup products)");
        } else if (mma) {
            int rows = CudaAttention.mmaRows(headDim);
            int tiles = (plan.maxQLen() * (qoHeads / kvHeads) + rows - 1) / rows;
            device.kernel("attn_ragged_mma_bf16_d" + headDim).launch(device.stream(), tiles, kvHeads, plan.rows(),
                    CudaAttention.MMA_THREADS, CudaAttention.mmaSmemBytes(rows, headDim), args,
                    "raggedAttention (tensor cores)");
        } else {
            int smem = ((QUERY_TILE + 2 * KEY_TILE) * (headDim + 1) + QUERY_TILE * (KEY_TILE + 1)) * 4;
            int tiles = (plan.maxQLen() + QUERY_TILE - 1) / QUERY_TILE;
            device.kernel("attn_ragged_" + type + "_d" + headDim).launch(device.stream(), tiles, qoHeads, plan.rows(),
                    THREADS, smem, args, "raggedAttention");
        }
    }

    /** @throws UnsupportedOnDeviceException unless a ragged kernel for {@code headDim} is compiled */
    static void requireHeadDim(int headDim, DType dtype) {
        boolean compiled = dtype == DType.F32 ? HEAD_DIMS.contains(headDim)
                : dtype == DType.BF16 && (HEAD_DIMS.contains(headDim) || MMA_HEAD_DIMS.contains(headDim));
        if (!compiled) {
            throw new UnsupportedOnDeviceException("ragged attention head dim " + headDim + " in " + dtype
                    + " has no CUDA kernel (fp32: " + HEAD_DIMS + "; bf16: " + HEAD_DIMS + " and " + MMA_HEAD_DIMS + ")");
        }
    }
}
