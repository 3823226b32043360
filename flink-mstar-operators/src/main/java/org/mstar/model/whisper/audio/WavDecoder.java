package org.mstar.model.whisper.audio;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import javax.sound.sampled.AudioFileFormat;
import javax.sound.sampled.AudioFormat;
import javax.sound.sampled.AudioInputStream;
import javax.sound.sampled.AudioSystem;
import javax.sound.sampled.UnsupportedAudioFileException;

/**
 * Reads RIFF/WAVE bytes with the JDK's {@code javax.sound.sampled} (which parses the chunks, including
 * WAVE_FORMAT_EXTENSIBLE) and turns the frames into mono floats: integer PCM of 8 (unsigned), 16, 24 or 32 bits
 * scaled by 2^(bits-1), IEEE float of 32 or 64 bits as is; several channels are averaged. No resampling: the
 * sample rate is reported for the caller to check.
 */
public final class WavDecoder {
    private WavDecoder() {
    }

    public static WavAudio decode(byte[] wav) throws WavFormatException {
        if (wav.length < 12 || !ascii(wav, 0, "RIFF") || !ascii(wav, 8, "WAVE")) {
            throw new WavFormatException("not a WAV file (no RIFF/WAVE header)");
        }
        try (AudioInputStream in = AudioSystem.getAudioInputStream(new ByteArrayInputStream(wav))) {
            AudioFileFormat.Type type = AudioSystem.getAudioFileFormat(new ByteArrayInputStream(wav)).getType();
            if (!AudioFileFormat.Type.WAVE.equals(type)) {
                throw new WavFormatException("not a WAV file (read as " + type + ")");
            }
            AudioFormat format = in.getFormat();
            byte[] frames = in.readAllBytes();
            return new WavAudio(toMono(frames, format), Math.round(format.getSampleRate()), format.getChannels());
        } catch (UnsupportedAudioFileException e) {
            throw new WavFormatException("unreadable WAV file: " + e.getMessage(), e);
        } catch (IOException e) {
            throw new WavFormatException("truncated or corrupt WAV file: " + e.getMessage(), e);
        }
    }

    /**
     * The duration a WAV file's header declares, read without its samples, so that a caller can refuse a file that
     * is too long before loading it.
     */
    public static double declaredSeconds(Path file) throws WavFormatException, IOException {
        byte[] head = new byte[12];
        try (InputStream in = Files.newInputStream(file)) {
            if (in.readNBytes(head, 0, head.length) < head.length || !ascii(head, 0, "RIFF") || !ascii(head, 8, "WAVE")) {
                throw new WavFormatException("not a WAV file (no RIFF/WAVE header)");
            }
        }
        try {
            AudioFileFormat header = AudioSystem.getAudioFileFormat(file.toFile());
            AudioFormat format = header.getFormat();
            long frames = header.getFrameLength() != AudioSystem.NOT_SPECIFIED ? header.getFrameLength()
                    : Files.size(file) / Math.max(1, format.getFrameSize());
            return frames / (double) format.getFrameRate();
        } catch (UnsupportedAudioFileException e) {
            throw new WavFormatException("unreadable WAV file: " + e.getMessage(), e);
        }
    }

    private static float[] toMono(byte[] frames, AudioFormat format) throws WavFormatException {
        int channels = format.getChannels();
        int bits = format.getSampleSizeInBits();
        int bytesPerSample = bits / 8;
        AudioFormat.Encoding encoding = format.getEncoding();
        boolean isFloat = AudioFormat.Encoding.PCM_FLOAT.equals(encoding);
        boolean signed = AudioFormat.Encoding.PCM_SIGNED.equals(encoding);
        boolean unsigned = AudioFormat.Encoding.PCM_UNSIGNED.equals(encoding);
        if (!(isFloat || signed || unsigned) || channels < 1 || bits % 8 != 0
                || (isFloat ? bits != 32 && bits != 64 : bits < 8 || bits > 32)) {
            throw new WavFormatException("unsupported WAV sample format: " + format
                    + " (PCM 8/16/24/32-bit or float 32/64-bit)");
        }
        int frameBytes = bytesPerSample * channels;
        int count = frames.length / frameBytes;
        ByteBuffer buf = ByteBuffer.wrap(frames)
                .order(format.isBigEndian() ? ByteOrder.BIG_ENDIAN : ByteOrder.LITTLE_ENDIAN);
        double scale = 1.0 / (1L << (bits - 1));
        float[] mono = new float[count];
        for (int i = 0; i < count; i++) {
            double sum = 0;
            for (int c = 0; c < channels; c++) {
                int at = i * frameBytes + c * bytesPerSample;
                if (isFloat) {
                    sum += bits == 32 ? buf.getFloat(at) : buf.getDouble(at);
                } else {
                    long v = integer(buf, at, bytesPerSample);
                    sum += unsigned ? (v - (1L << (bits - 1))) * scale : signExtend(v, bits) * scale;
                }
            }
            mono[i] = (float) (sum / channels);
        }
        return mono;
    }

    /** The sample's raw bits, read in the buffer's byte order. */
    private static long integer(ByteBuffer buf, int at, int bytes) {
        long v = 0;
        boolean little = buf.order() == ByteOrder.LITTLE_ENDIAN;
        for (int b = 0; b < bytes; b++) {
            int shift = 8 * (little ? b : bytes - 1 - b);
            v |= (long) (buf.get(at + b) & 0xff) << shift;
        }
        return v;
    }

    private static long signExtend(long v, int bits) {
        return (v << (64 - bits)) >> (64 - bits);
    }

    private static boolean ascii(byte[] bytes, int at, String tag) {
        for (int i = 0; i < tag.length(); i++) {
            if (bytes[at + i] != tag.charAt(i)) {
                return false;
            }
        }
        return true;
    }
}
