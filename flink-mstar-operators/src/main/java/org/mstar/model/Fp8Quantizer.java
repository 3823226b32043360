package org.mstar.model;

import java.util.stream.IntStream;
import org.mstar.device.Float8E4m3;

/**
 * Quantises a weight matrix to FP8 E4M3 with the scales of an {@link Fp8Quantization} layout, and defines the real
 * value of a stored element. Each scale is its block's (row's, tensor's) largest magnitude over 448, as DeepSeek's
 * and llm-compressor's quantisers choose it, so the largest element maps to ±448 and none saturates.
 */
public final class Fp8Quantizer {
    /**
     * A quantised {@code [rows, cols]} weight.
     *
     * @param codes row-major E4M3 codes
     * @param scales row-major scales, shaped {@link Fp8Quantization#scaleShape}
     */
    public record Quantised(byte[] codes, float[] scales) {}

    private Fp8Quantizer() {}

    /** The real value of a stored code: the FP8 value times its scale, rounded once to fp32. */
    public static float dequantise(byte code, float scale) {
        return Float8E4m3.decode(code) * scale;
    }

    /** Quantises the row-major {@code [rows, cols]} matrix {@code w}. */
    public static Quantised quantise(float[] w, int rows, int cols, Fp8Quantization q) {
        long[] scaleShape = q.scaleShape(rows, cols);
        float[] scales = new float[Math.toIntExact(scaleShape.length == 1 ? scaleShape[0] : scaleShape[0] * scaleShape[1])];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int s = q.scaleIndex(r, c, cols);
                scales[s] = Math.max(scales[s], Math.abs(w[r * cols + c]));
            }
        }
        for (int s = 0; s < scales.length; s++) {
            scales[s] = scales[s] > 0 ? scales[s] / Float8E4m3.MAX : 1f; // an all-zero block: any scale keeps zeros
        }
        byte[] codes = new byte[w.length];
        // each code depends on its value and scale alone: rows encode in parallel (an 8B model's 7e9 codes took
        // minutes on one thread)
        IntStream.range(0, rows).parallel().forEach(r -> {
            for (int c = 0; c < cols; c++) {
                codes[r * cols + c] = Float8E4m3.encode(w[r * cols + c] / scales[q.scaleIndex(r, c, cols)]);
            }
        });
        return new Quantised(codes, scales);
    }
}
