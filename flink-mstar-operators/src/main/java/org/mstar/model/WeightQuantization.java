package org.mstar.model;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** How an engine keeps its Linear weights on the device. */
public enum WeightQuantization {
    /** In the engine's dtype: an FP8 checkpoint is dequantised at load. */
    NONE,
    /**
     * As FP8 E4M3 codes with fp32 scales ({@link org.mstar.device.Fp8Weight}): an FP8 checkpoint keeps its codes and
     * scales; every other {@code *_proj} weight is quantised at load with one scale an output row (its largest
     * magnitude over 448, codes rounded to nearest even and saturated). The LM head stays in the engine's dtype
     * unless the checkpoint stores it in FP8. Activations stay in the engine's dtype (weight-only).
     */
    FP8,
    /**
     * The weights of {@link #FP8}, and each product's input rows quantised per token to FP8 as well (W8A8, dynamic
     * scales: {@link org.mstar.device.Fp8Rows}), so that a GPU multiplies FP8 × FP8 on its tensor cores. The CPU
     * computes the same definition (quantise, dequantise, fp32 sums): it is the reference the GPU is checked against.
     */
    FP8_W8A8;

    /**
     * The value of a {@code --quantization} flag or config key: {@code none}, {@code fp8} or {@code fp8-w8a8}, any
     * case.
     */
    public static WeightQuantization parse(String value) {
        for (WeightQuantization q : values()) {
            if (q.flag().equalsIgnoreCase(value.trim())) {
                return q;
            }
        }
        throw new IllegalArgumentException("unknown weight quantization '" + value + "': expected one of "
                + Arrays.stream(values()).map(WeightQuantization::flag).collect(Collectors.joining(", ")));
    }

    /** The name flags and config keys use. */
    public String flag() {
        return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    /** Whether the projections' weights stay in FP8 on the device. */
    public boolean fp8Weights() {
        return this != NONE;
    }
}
