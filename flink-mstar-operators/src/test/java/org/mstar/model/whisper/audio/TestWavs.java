package org.mstar.model.whisper.audio;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** WAV bytes for tests: 16-bit PCM of given samples, or any header over raw frame bytes. */
public final class TestWavs {
    private TestWavs() {
    }

    /** 16-bit PCM mono at {@code rate} Hz. */
    public static byte[] pcm16(float[] samples, int rate) {
        ByteBuffer data = ByteBuffer.allocate(samples.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float s : samples) {
            data.putShort((short) Math.max(-32768, Math.min(32767, Math.round(s * 32768.0))));
        }
        return wav(1, 1, 16, rate, data.array());
    }

    /** A tone of {@code seconds} at {@code hz}, amplitude 0.5, 16-bit PCM at {@code rate} Hz. */
    public static byte[] tone(double seconds, double hz, int rate) {
        float[] samples = new float[(int) Math.round(seconds * rate)];
        for (int i = 0; i < samples.length; i++) {
            samples[i] = (float) (0.5 * Math.sin(2 * Math.PI * hz * i / rate));
        }
        return pcm16(samples, rate);
    }

    /** A canonical RIFF/WAVE file: format tag 1 (PCM) or 3 (float), little-endian frames as given. */
    public static byte[] wav(int formatTag, int channels, int bits, int rate, byte[] frames) {
        int block = channels * bits / 8;
        ByteBuffer b = ByteBuffer.allocate(44 + frames.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put("RIFF".getBytes()).putInt(36 + frames.length).put("WAVE".getBytes());
        b.put("fmt ".getBytes()).putInt(16).putShort((short) formatTag).putShort((short) channels)
                .putInt(rate).putInt(rate * block).putShort((short) block).putShort((short) bits);
        b.put("data".getBytes()).putInt(frames.length).put(frames);
        return b.array();
    }
}
