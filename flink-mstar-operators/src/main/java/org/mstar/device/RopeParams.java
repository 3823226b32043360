package org.mstar.device;

/**
 * Rotary embedding parameters. Inverse frequency {@code theta^(-2i/rotaryDim)} for pair i; positions
 * are divided by {@code scale} (linear interpolation) unless the Llama-3.1 rule is active
 * ({@code llama31}), which instead rescales each frequency by its wavelength:
 * {@code wavelen = 2π/inv}; {@code wavelen < oldContextLen/highFreqFactor} keeps {@code inv};
 * {@code wavelen > oldContextLen/lowFreqFactor} uses {@code inv/scale}; otherwise, with
 * {@code s = (oldContextLen/wavelen - lowFreqFactor)/(highFreqFactor - lowFreqFactor)},
 * {@code inv' = (1-s)·inv/scale + s·inv}.
 *
 * @param rotaryDim rotated dims of each head (even, &lt;= headDim); the rest pass through
 * @param interleave pairs (2i, 2i+1) when true (GPT-J), (i, i + rotaryDim/2) when false (NeoX)
 */
public record RopeParams(int rotaryDim, boolean interleave, double theta, double scale, boolean llama31,
                         double lowFreqFactor, double highFreqFactor, double oldContextLen) {

    public static RopeParams standard(int rotaryDim, double theta) {
        return new RopeParams(rotaryDim, false, theta, 1.0, false, 0, 0, 0);
    }

    /** Inverse frequency of pair i after scaling, in double precision (the canonical table). */
    public double invFreq(int i) {
        double inv = Math.pow(theta, -2.0 * i / rotaryDim);
        if (!llama31) {
            return inv / scale;
        }
        double wavelen = 2 * Math.PI / inv;
        double lowWavelen = oldContextLen / lowFreqFactor;
        double highWavelen = oldContextLen / highFreqFactor;
        if (wavelen < highWavelen) {
            return inv;
        }
        if (wavelen > lowWavelen) {
            return inv / scale;
        }
        double s = (oldContextLen / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        return (1 - s) * inv / scale + s * inv;
    }
}
