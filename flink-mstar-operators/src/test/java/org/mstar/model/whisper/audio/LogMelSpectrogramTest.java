package org.mstar.model.whisper.audio;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * The front end against transformers' WhisperFeatureExtractor on the fixtures of
 * scripts/fixtures/write_audio_fixtures.py: the WAV decoded here, the features transformers computed from the same
 * samples.
 */
class LogMelSpectrogramTest {
    /** Measured 2026-12-02: at most 1.2e-7 (one float ulp at 1) over all fixtures (docs/guides/speech-to-text.md). */
    private static final double TOLERANCE = 1e-6;

    @ParameterizedTest
    @CsvSource({"tones,80", "chirp,80", "noise,80", "silence,80", "short,80",
                "tones,128", "chirp,128", "noise,128", "silence,128", "short,128"})
    void matchesTransformersFeatures(String signal, int bins) throws Exception {
        float[] samples = WavDecoder.decode(resource(signal + ".wav")).samples();
        float[] expected = floats(gunzip(resource(signal + ".mel" + bins + ".f32.gz")));

        float[] actual = new LogMelSpectrogram(bins).compute(samples);

        assertThat(actual).hasSize(bins * LogMelSpectrogram.FRAMES).hasSameSizeAs(expected);
        assertThat(maxAbsDiff(actual, expected)).as("max |java - transformers| for %s, %d bins", signal, bins)
                .isLessThan(TOLERANCE);
    }

    @Test
    void silenceIsTheFloorEverywhere() {
        float[] features = new LogMelSpectrogram(80).compute(new float[16_000]);
        // log10(1e-10) = -10, (-10 + 4) / 4
        for (float v : features) {
            assertThat(v).isEqualTo(-1.5f);
        }
    }

    @Test
    void audioPastThirtySecondsIsCutAndAWindowCanStartLater() {
        float[] samples = new float[LogMelSpectrogram.WINDOW_SAMPLES + 48_000];
        for (int i = 0; i < samples.length; i++) {
            samples[i] = (float) (0.3 * Math.sin(i * (i < LogMelSpectrogram.WINDOW_SAMPLES ? 0.1 : 0.7)));
        }
        LogMelSpectrogram mel = new LogMelSpectrogram(80);

        assertThat(mel.compute(samples))
                .containsExactly(mel.compute(Arrays.copyOf(samples, LogMelSpectrogram.WINDOW_SAMPLES)));
        float[] tail = Arrays.copyOfRange(samples, LogMelSpectrogram.WINDOW_SAMPLES, samples.length);
        assertThat(mel.compute(samples, LogMelSpectrogram.WINDOW_SAMPLES)).containsExactly(mel.compute(tail));
    }

    @Test
    void dynamicRangeIsEightDecadesBelowTheWindowMaximum() {
        float[] samples = new float[32_000];
        samples[16_000] = 1f;  // one click: loud frames around it, silence (-10 before the clamp) elsewhere
        float[] features = new LogMelSpectrogram(80).compute(samples);
        float max = Float.NEGATIVE_INFINITY;
        float min = Float.POSITIVE_INFINITY;
        for (float v : features) {
            max = Math.max(max, v);
            min = Math.min(min, v);
        }
        assertThat(min).isCloseTo(max - 2f, org.assertj.core.data.Offset.offset(1e-6f));
    }

    static double maxAbsDiff(float[] a, float[] b) {
        double max = 0;
        for (int i = 0; i < a.length; i++) {
            max = Math.max(max, Math.abs((double) a[i] - b[i]));
        }
        return max;
    }

    static byte[] resource(String name) throws IOException {
        try (InputStream in = LogMelSpectrogramTest.class.getResourceAsStream(name)) {
            assertThat(in).as("fixture %s", name).isNotNull();
            return in.readAllBytes();
        }
    }

    private static byte[] gunzip(byte[] gz) throws IOException {
        try (InputStream in = new GZIPInputStream(new java.io.ByteArrayInputStream(gz))) {
            return in.readAllBytes();
        }
    }

    private static float[] floats(byte[] bytes) {
        float[] out = new float[bytes.length / 4];
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
        return out;
    }
}
