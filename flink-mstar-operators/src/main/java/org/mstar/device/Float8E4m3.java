package org.mstar.device;

import java.util.Arrays;

/**
 * The FP8 format of FP8 checkpoints: OCP E4M3FN, PyTorch's {@code torch.float8_e4m3fn} (safetensors dtype
 * {@code F8_E4M3}). One sign bit, four exponent bits with bias 7, three mantissa bits; exponent 0 is subnormal;
 * there are no infinities, so that the top exponent holds normal values up to ±448 and only S.1111.111 is NaN.
 */
public final class Float8E4m3 {
    /** The largest finite magnitude. */
    public static final float MAX = 448f;
    /** The code of +{@link #MAX}; its negative is {@code MAX_CODE | 0x80}. */
    private static final int MAX_CODE = 0x7E;

    private static final float[] VALUES = new float[256];
    /** The 127 non-negative finite values, ascending: their codes are their indices. */
    private static final float[] NON_NEGATIVE;

    static {
        for (int b = 0; b < 256; b++) {
            VALUES[b] = fromBits(b);
        }
        NON_NEGATIVE = Arrays.copyOf(VALUES, MAX_CODE + 1);
    }

    private Float8E4m3() {}

    private static float fromBits(int b) {
        int exponent = (b >>> 3) & 0xF;
        int mantissa = b & 0x7;
        float magnitude;
        if (exponent == 0xF && mantissa == 0x7) {
            magnitude = Float.NaN;
        } else if (exponent == 0) {
            magnitude = mantissa * 0x1.0p-9f; // subnormal: 0.mmm × 2^(1 - 7)
        } else {
            magnitude = Float.intBitsToFloat((exponent - 7 + 127) << 23 | mantissa << 20);
        }
        return (b & 0x80) != 0 ? -magnitude : magnitude;
    }

    /** The value of the code {@code bits} (only its low 8 bits count). */
    public static float decode(byte bits) {
        return VALUES[bits & 0xFF];
    }

    /**
     * The code nearest {@code v}, ties to the even code; magnitudes beyond {@link #MAX} saturate to ±MAX (as
     * quantisers clamp, since the format has no infinity), and NaN stays NaN.
     */
    public static byte encode(float v) {
        int sign = Float.floatToRawIntBits(v) < 0 ? 0x80 : 0;
        if (Float.isNaN(v)) {
            return (byte) (sign | 0x7F);
        }
        float a = Math.abs(v);
        if (a >= MAX) {
            return (byte) (sign | MAX_CODE);
        }
        int found = Arrays.binarySearch(NON_NEGATIVE, a);
        if (found >= 0) {
            return (byte) (sign | found);
        }
        int above = -found - 1;
        int below = above - 1;
        // compare a - lo with hi - a as 2a against lo + hi, which doubles hold exactly
        double twice = 2.0 * a;
        double sum = (double) NON_NEGATIVE[below] + NON_NEGATIVE[above];
        int code = twice < sum ? below : twice > sum ? above : (below % 2 == 0 ? below : above);
        return (byte) (sign | code);
    }
}
