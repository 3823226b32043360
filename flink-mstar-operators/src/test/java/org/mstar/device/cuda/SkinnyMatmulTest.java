package org.mstar.device.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import jcuda.driver.CUdeviceptr;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;

/** Which products the skinny-matmul kernel takes (no GPU needed: tensors over an unallocated address). */
class SkinnyMatmulTest {
    private static final int ROWS = 16;

    private static CudaTensor tensor(DType dtype, long... shape) {
        return new CudaTensor(null, dtype, shape, new CUdeviceptr(), null);
    }

    private static boolean accepts(CudaTensor x, CudaTensor w, CudaTensor bias, CudaTensor out) {
        return SkinnyMatmul.accepts(x, w, bias, out, x.dim(0), w.dim(1), ROWS);
    }

    @Test
    void takesBf16DecodeProjectionsIntoBf16OrFp32() {
        CudaTensor w = tensor(DType.BF16, 6144, 4096);
        assertThat(accepts(tensor(DType.BF16, 1, 4096), w, null, tensor(DType.BF16, 1, 6144))).isTrue();
        assertThat(accepts(tensor(DType.BF16, 16, 4096), w, null, tensor(DType.F32, 16, 6144))).isTrue();
        // a row view of a larger batch starts 16-byte aligned when K is a multiple of 64
        CudaTensor rows = (CudaTensor) tensor(DType.BF16, 40, 4096).rows(3, 5);
        assertThat(accepts(rows, w, null, tensor(DType.BF16, 5, 6144))).isTrue();
        // a bias joins in the epilogue (Whisper's projections)
        assertThat(accepts(tensor(DType.BF16, 4, 4096), w, tensor(DType.BF16, 6144), tensor(DType.BF16, 4, 6144)))
                .isTrue();
    }

    @Test
    void leavesEverythingElseToCublas() {
        CudaTensor w = tensor(DType.BF16, 1024, 4096);
        CudaTensor out = tensor(DType.BF16, 4, 1024);
        assertThat(accepts(tensor(DType.BF16, 17, 4096), w, null, tensor(DType.BF16, 17, 1024))).as("rows").isFalse();
        assertThat(accepts(tensor(DType.BF16, 4, 4096), w, tensor(DType.I32, 1024), out)).as("int bias").isFalse();
        assertThat(accepts(tensor(DType.F32, 4, 4096), tensor(DType.F32, 1024, 4096), null, out)).as("fp32").isFalse();
        assertThat(accepts(tensor(DType.F16, 4, 4096), tensor(DType.F16, 1024, 4096), null, tensor(DType.F16, 4, 1024)))
                .as("fp16").isFalse();
        assertThat(accepts(tensor(DType.BF16, 4, 4000), tensor(DType.BF16, 1024, 4000), null, out)).as("K").isFalse();
        CudaTensor unaligned = (CudaTensor) tensor(DType.BF16, 4 * 4096 + 3).rows(3, 4 * 4096).reshape(4, 4096);
        assertThat(accepts(unaligned, w, null, out)).as("unaligned x").isFalse();
        assertThat(SkinnyMatmul.accepts(tensor(DType.BF16, 1, 4096), w, null, tensor(DType.BF16, 1, 1024), 1, 4096, 0))
                .as("switched off").isFalse();
    }

    @Test
    void pipelinesTheShapesWhereItWonOnAnH200() {
        int sms = 132;
        // Llama-3.1-8B: o (256 tiles) and down (K 14336), gate_up and the LM head (many waves, K 4096)
        assertThat(SkinnyMatmul.pipelined(4096, 4096, sms)).as("8B o").isTrue();
        assertThat(SkinnyMatmul.pipelined(4096, 14336, sms)).as("8B down").isTrue();
        assertThat(SkinnyMatmul.pipelined(28672, 4096, sms)).as("8B gate_up").isTrue();
        assertThat(SkinnyMatmul.pipelined(128256, 4096, sms)).as("8B LM head").isTrue();
        // 384 tiles: one wave at four blocks per SM, two at two
        assertThat(SkinnyMatmul.pipelined(6144, 4096, sms)).as("8B qkv").isFalse();
        // Llama-3.2-1B: few tiles (qkv, o), K 8192 (down); many waves at K 2048 stay plain (gate_up, LM head)
        assertThat(SkinnyMatmul.pipelined(3072, 2048, sms)).as("1B qkv").isTrue();
        assertThat(SkinnyMatmul.pipelined(2048, 2048, sms)).as("1B o").isTrue();
        assertThat(SkinnyMatmul.pipelined(2048, 8192, sms)).as("1B down").isTrue();
        assertThat(SkinnyMatmul.pipelined(16384, 2048, sms)).as("1B gate_up").isFalse();
        assertThat(SkinnyMatmul.pipelined(128256, 2048, sms)).as("1B LM head").isFalse();
    }
}
