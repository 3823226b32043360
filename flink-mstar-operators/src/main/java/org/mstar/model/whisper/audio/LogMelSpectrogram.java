package org.mstar.model.whisper.audio;

import org.jtransforms.fft.DoubleFFT_1D;

/**
 * Whisper's input features: the log-mel spectrogram of one 30-second window of 16 kHz mono audio, as transformers'
 * {@code WhisperFeatureExtractor} computes it. The window is zero-padded or cut to 480,000 samples; a centred STFT
 * (400-point periodic Hann window, hop 160, reflect padding) gives 3,001 frames of which the last is dropped; the
 * power spectrum goes through Slaney mel filters over 0-8 kHz, then {@code log10(max(x, 1e-10))}, a floor at the
 * window's maximum minus 8, and {@code (x + 4) / 4}. The FFT is JTransforms' (400 is not a power of two).
 * Everything is computed in double and rounded to float at the end. Instances are immutable and thread-safe.
 */
public final class LogMelSpectrogram {
    public static final int SAMPLE_RATE = 16_000;
    public static final int N_FFT = 400;
    public static final int HOP = 160;
    public static final int WINDOW_SAMPLES = 30 * SAMPLE_RATE;
    public static final int FRAMES = WINDOW_SAMPLES / HOP;

    private static final double MEL_FLOOR = 1e-10;
    private static final double DYNAMIC_RANGE = 8.0;

    private final MelFilterBank filters;
    private final double[] hann;

    /** {@code melBins}: 80 (Whisper up to large-v2) or 128 (large-v3 and later); any positive count works. */
    public LogMelSpectrogram(int melBins) {
        this.filters = new MelFilterBank(melBins, N_FFT, SAMPLE_RATE, 0.0, 8000.0);
        this.hann = new double[N_FFT];
        for (int i = 0; i < N_FFT; i++) {
            // periodic: the first N of an N+1-point symmetric window
            hann[i] = 0.5 - 0.5 * Math.cos(2 * Math.PI * i / N_FFT);
        }
    }

    public int melBins() {
        return filters.bins();
    }

    /** The features of the first 30 s of {@code samples}: {@code melBins() * FRAMES} values, mel bin major. */
    public float[] compute(float[] samples) {
        return compute(samples, 0);
    }

    /**
     * The features of the 30 s window of {@code samples} that starts at sample {@code start} (zero-padded past the
     * end), laid out as transformers' {@code input_features[0]}: element {@code [bin * FRAMES + frame]}.
     */
    public float[] compute(float[] samples, int start) {
        if (start < 0 || start > samples.length) {
            throw new IllegalArgumentException("window start " + start + " outside 0.." + samples.length);
        }
        int length = Math.min(WINDOW_SAMPLES, samples.length - start);
        double[] padded = reflectPadded(samples, start, length);
        int bins = filters.bins();
        double[] logMel = new double[bins * FRAMES];
        double[] frame = new double[N_FFT];
        double[] power = new double[filters.frequencies()];
        DoubleFFT_1D fft = new DoubleFFT_1D(N_FFT);
        double max = Double.NEGATIVE_INFINITY;
        for (int t = 0; t < FRAMES; t++) {
            int offset = t * HOP;
            for (int i = 0; i < N_FFT; i++) {
                frame[i] = padded[offset + i] * hann[i];
            }
            fft.realForward(frame);
            powerSpectrum(frame, power);
            for (int m = 0; m < bins; m++) {
                double v = Math.log10(Math.max(MEL_FLOOR, filters.apply(m, power)));
                logMel[m * FRAMES + t] = v;
                max = Math.max(max, v);
            }
        }
        double floor = max - DYNAMIC_RANGE;
        float[] out = new float[logMel.length];
        for (int i = 0; i < out.length; i++) {
            out[i] = (float) ((Math.max(logMel[i], floor) + 4.0) / 4.0);
        }
        return out;
    }

    /** The window's samples, zero-padded to 30 s, with N_FFT/2 reflected samples before and after. */
    private static double[] reflectPadded(float[] samples, int start, int length) {
        int pad = N_FFT / 2;
        double[] padded = new double[WINDOW_SAMPLES + 2 * pad];
        for (int i = 0; i < length; i++) {
            padded[pad + i] = samples[start + i];
        }
        for (int k = 1; k <= pad; k++) {
            padded[pad - k] = padded[pad + k];
            padded[pad + WINDOW_SAMPLES - 1 + k] = padded[pad + WINDOW_SAMPLES - 1 - k];
        }
        return padded;
    }

    /** |X[k]|^2 from JTransforms' in-place real FFT layout (even n: re0, re(n/2), re1, im1, re2, im2, ...). */
    private static void powerSpectrum(double[] fft, double[] power) {
        int half = N_FFT / 2;
        power[0] = fft[0] * fft[0];
        power[half] = fft[1] * fft[1];
        for (int k = 1; k < half; k++) {
            double re = fft[2 * k];
            double im = fft[2 * k + 1];
            power[k] = re * re + im * im;
        }
    }

    /** Bin-major features {@code [melBins, frames]} turned frames-major {@code [frames, melBins]}. */
    public static float[] framesMajor(float[] binMajor, int melBins) {
        int frames = binMajor.length / melBins;
        float[] out = new float[binMajor.length];
        for (int m = 0; m < melBins; m++) {
            for (int t = 0; t < frames; t++) {
                out[t * melBins + m] = binMajor[m * frames + t];
            }
        }
        return out;
    }
}
