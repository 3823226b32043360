package org.mstar.bench;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.mstar.model.whisper.audio.LogMelSpectrogram;
import org.mstar.model.whisper.audio.WavAudio;
import org.mstar.model.whisper.audio.WavDecoder;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The audio front end's cost per 30-second window of 16 kHz speech-like noise, on one thread: {@code decodeWav}
 * (a 16-bit mono WAV of 30 s, 960 KB, to floats) and {@code logMel} (Whisper's features of the window, 80 or 128
 * bins).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class AudioFrontEndBenchmark {
    @Param({"80", "128"})
    int melBins;

    private byte[] wav;
    private float[] samples;
    private LogMelSpectrogram spectrogram;

    @Setup
    public void setup() {
        int n = LogMelSpectrogram.WINDOW_SAMPLES;
        Random random = new Random(14);
        ByteBuffer frames = ByteBuffer.allocate(2 * n).order(ByteOrder.LITTLE_ENDIAN);
        samples = new float[n];
        for (int i = 0; i < n; i++) {
            short s = (short) Math.round(4000 * Math.sin(i * 0.05) + 2000 * random.nextGaussian());
            frames.putShort(s);
            samples[i] = s / 32768f;
        }
        ByteBuffer b = ByteBuffer.allocate(44 + 2 * n).order(ByteOrder.LITTLE_ENDIAN);
        b.put("RIFF".getBytes()).putInt(36 + 2 * n).put("WAVE".getBytes());
        b.put("fmt ".getBytes()).putInt(16).putShort((short) 1).putShort((short) 1).putInt(16_000).putInt(32_000)
                .putShort((short) 2).putShort((short) 16);
        b.put("data".getBytes()).putInt(2 * n).put(frames.array());
        wav = b.array();
        spectrogram = new LogMelSpectrogram(melBins);
    }

    @Benchmark
    public WavAudio decodeWav() throws Exception {
        return WavDecoder.decode(wav);
    }

    @Benchmark
    public float[] logMel() {
        return spectrogram.compute(samples);
    }
}
