package org.mstar.device;

/**
 * Conversions between fp32 and the 16-bit storage types, bit-exact with IEEE/PyTorch: round to nearest,
 * ties to even; NaN stays NaN; overflow becomes infinity.
 */
public final class HalfFloats {
    private HalfFloats() {}

    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    public static short floatToBf16(float f) {
        int x = Float.floatToRawIntBits(f);
        if ((x & 0x7F800000) == 0x7F800000 && (x & 0x007FFFFF) != 0) {
            return (short) ((x >>> 16) | 0x0040); // quiet NaN, keep sign
        }
        int rounding = 0x7FFF + ((x >>> 16) & 1);
        return (short) ((x + rounding) >>> 16);
    }

    /** fp32 rounded through bf16 and back: what bf16 storage keeps of {@code f}. */
    public static float roundBf16(float f) {
        return bf16ToFloat(floatToBf16(f));
    }

    public static float f16ToFloat(short bits) {
        int h = bits & 0xFFFF;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1F;
        int mant = h & 0x3FF;
        if (exp == 0) {
            if (mant == 0) {
                return Float.intBitsToFloat(sign);
            }
            // subnormal: value = mant * 2^-24
            float v = mant * 0x1.0p-24f;
            return sign == 0 ? v : -v;
        }
        if (exp == 0x1F) {
            return Float.intBitsToFloat(sign | 0x7F800000 | (mant << 13));
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    public static short floatToF16(float f) {
        int x = Float.floatToRawIntBits(f);
        int sign = (x >>> 16) & 0x8000;
        int exp = (x >>> 23) & 0xFF;
        int mant = x & 0x7FFFFF;
        if (exp == 0xFF) {
            return (short) (sign | 0x7C00 | (mant != 0 ? 0x200 : 0));
        }
        int e = exp - 127 + 15;
        if (e >= 0x1F) {
            return (short) (sign | 0x7C00);
        }
        if (e <= 0) {
            if (e < -10) {
                return (short) sign;
            }
            // subnormal half: shift the full significand, round to nearest even
            int m = mant | 0x800000;
            int shift = 14 - e;
            int half = m >>> shift;
            int rem = m & ((1 << shift) - 1);
            int mid = 1 << (shift - 1);
            if (rem > mid || (rem == mid && (half & 1) != 0)) {
                half++;
            }
            return (short) (sign | half);
        }
        int half = (e << 10) | (mant >>> 13);
        int rem = mant & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (half & 1) != 0)) {
            half++; // may carry into the exponent, which is the correct rounding
        }
        return (short) (sign | half);
    }

    public static float roundF16(float f) {
        return f16ToFloat(floatToF16(f));
    }
}
