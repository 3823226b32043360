package org.mstar.model.whisper.audio;

/**
 * Triangular mel filters on the Slaney mel scale with Slaney (equal-area) normalisation, over the one-sided
 * spectrum of an {@code nFft}-point FFT: the filters librosa and transformers' {@code mel_filter_bank(...,
 * norm="slaney", mel_scale="slaney")} build for Whisper.
 */
public final class MelFilterBank {
    private static final double HZ_PER_LINEAR_MEL = 200.0 / 3.0;
    private static final double MIN_LOG_HZ = 1000.0;
    private static final double MIN_LOG_MEL = MIN_LOG_HZ / HZ_PER_LINEAR_MEL;
    private static final double LOG_STEP = Math.log(6.4) / 27.0;

    private final int bins;
    private final int frequencies;
    /** weights[m * frequencies + f]. */
    private final double[] weights;
    /** Per filter, the first and one-past-last frequency bin with a non-zero weight. */
    private final int[] from;
    private final int[] to;

    public MelFilterBank(int bins, int nFft, int sampleRate, double minHz, double maxHz) {
        if (bins < 1) {
            throw new IllegalArgumentException("mel bins must be >= 1, got " + bins);
        }
        this.bins = bins;
        this.frequencies = nFft / 2 + 1;
        this.weights = new double[bins * frequencies];
        this.from = new int[bins];
        this.to = new int[bins];
        double melMin = hzToMel(minHz);
        double melMax = hzToMel(maxHz);
        double[] edges = new double[bins + 2];
        for (int i = 0; i < edges.length; i++) {
            edges[i] = melToHz(melMin + i * (melMax - melMin) / (bins + 1));
        }
        double nyquist = sampleRate / 2;
        for (int m = 0; m < bins; m++) {
            double lower = edges[m];
            double centre = edges[m + 1];
            double upper = edges[m + 2];
            double area = 2.0 / (upper - lower);
            from[m] = frequencies;
            for (int f = 0; f < frequencies; f++) {
                double hz = f * nyquist / (frequencies - 1);
                double rising = (hz - lower) / (centre - lower);
                double falling = (upper - hz) / (upper - centre);
                double w = Math.max(0.0, Math.min(rising, falling)) * area;
                weights[m * frequencies + f] = w;
                if (w > 0) {
                    from[m] = Math.min(from[m], f);
                    to[m] = f + 1;
                }
            }
        }
    }

    public int bins() {
        return bins;
    }

    public int frequencies() {
        return frequencies;
    }

    public double weight(int bin, int frequency) {
        return weights[bin * frequencies + frequency];
    }

    /** The energy of mel bin {@code bin} in a power spectrum of {@link #frequencies()} values. */
    public double apply(int bin, double[] power) {
        double sum = 0;
        int row = bin * frequencies;
        for (int f = from[bin]; f < to[bin]; f++) {
            sum += weights[row + f] * power[f];
        }
        return sum;
    }

    static double hzToMel(double hz) {
        return hz < MIN_LOG_HZ ? hz / HZ_PER_LINEAR_MEL : MIN_LOG_MEL + Math.log(hz / MIN_LOG_HZ) / LOG_STEP;
    }

    static double melToHz(double mel) {
        return mel < MIN_LOG_MEL ? mel * HZ_PER_LINEAR_MEL : MIN_LOG_HZ * Math.exp(LOG_STEP * (mel - MIN_LOG_MEL));
    }
}
