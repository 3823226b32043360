package org.mstar.device.cpu;

import org.mstar.device.Float8E4m3;
import org.mstar.device.Fp8Rows;
import org.mstar.device.Tensor;

/**
 * Where a row-wise op stores its fp32 rows: a tensor (each value rounded once to its dtype) or {@link Fp8Rows}
 * (each row quantised with its own scale). Rows are written by index, from any thread.
 */
abstract class RowOutput {
    /** Stores {@code width} values of {@code v} from 0 as row {@code row}. */
    abstract void write(float[] v, int row);

    /**
     * The output for {@code out} of rows of {@code width}, checked to hold {@code elements} values.
     *
     * @throws IllegalArgumentException when it holds another count
     */
    static RowOutput of(Tensor out, int width, long elements, String what) {
        if (out.numel() != elements) {
            throw new IllegalArgumentException(what + " " + out + " should hold " + elements + " elements");
        }
        if (out instanceof Fp8Rows q) {
            if (q.dim(1) != width) {
                throw new IllegalArgumentException(what + " " + out + " should have rows of " + width);
            }
            CpuTensor codes = CpuTensor.of(q.codes());
            CpuTensor scales = CpuTensor.of(q.scales());
            return new RowOutput() {
                @Override
                void write(float[] v, int row) {
                    scales.f32()[scales.offset() + row] = Fp8Rows.quantise(v, 0, width, codes.u8(),
                            codes.offset() + row * width);
                }
            };
        }
        CpuTensor t = CpuTensor.of(out);
        return new RowOutput() {
            @Override
            void write(float[] v, int row) {
                FloatRows.write(v, 0, t, row * width, width);
            }
        };
    }

    /** The fp32 values FP8 rows stand for: {@code decode(code) · scale} of each element, rounded once. */
    static float[] dequantise(Fp8Rows x) {
        CpuTensor codes = CpuTensor.of(x.codes());
        CpuTensor scales = CpuTensor.of(x.scales());
        int k = Math.toIntExact(x.dim(1));
        float[] v = new float[codes.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = Float8E4m3.decode(codes.u8()[codes.offset() + i]) * scales.f32()[scales.offset() + i / k];
        }
        return v;
    }

    /** {@code x} {@code [rows, k]} quantised per row and dequantised again, as a W8A8 product reads it. */
    static float[] quantisedRoundTrip(CpuTensor x, int k) {
        float[] v = FloatRows.readAll(x);
        byte[] codes = new byte[k];
        for (int r = 0; r < v.length / k; r++) {
            float scale = Fp8Rows.quantise(v, r * k, k, codes, 0);
            for (int c = 0; c < k; c++) {
                v[r * k + c] = Float8E4m3.decode(codes[c]) * scale;
            }
        }
        return v;
    }
}
