package org.mstar.flink;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Pattern;
import org.mstar.engine.AudioInput;
import org.mstar.model.whisper.audio.WavAudio;
import org.mstar.model.whisper.audio.WavDecoder;
import org.mstar.model.whisper.audio.WavFormatException;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.Audio;

/**
 * Turns a request's {@link Audio} into the engine's {@link AudioInput}: reads the WAV (inline, or a file under
 * {@link GenerateOptions#AUDIO_DIR}), decodes it to mono and checks it. Audio must already be at 16 kHz: nothing is
 * resampled, so other rates are refused with a message saying what to do. Every problem is a
 * {@link RequestValidationException} naming the field.
 */
final class AudioConverter implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final Pattern LANGUAGE = Pattern.compile("[a-z]{2,3}");

    private final Duration maxDuration;
    /** Null: references are refused. */
    private final String dir;

    AudioConverter(Duration maxDuration, String dir) {
        this.maxDuration = maxDuration;
        this.dir = dir;
    }

    AudioInput convert(Audio a) {
        String task = a.getTask() == null ? "transcribe" : a.getTask();
        if (!task.equals("transcribe") && !task.equals("translate")) {
            throw new RequestValidationException("audio.task", "must be transcribe or translate, got '" + task + "'");
        }
        String language = a.getLanguage();
        if (language != null && !LANGUAGE.matcher(language).matches()) {
            throw new RequestValidationException("audio.language",
                    "must be an ISO 639-1 code such as en or de, got '" + language + "'");
        }
        if ((a.getWav() == null) == (a.getPath() == null)) {
            throw new RequestValidationException("audio", "set exactly one of wav and path");
        }
        String field = a.getWav() != null ? "audio.wav" : "audio.path";
        WavAudio wav = a.getWav() != null ? decode(field, bytes(a.getWav())) : decode(field, read(a.getPath()));
        if (wav.sampleRate() != AudioInput.SAMPLE_RATE) {
            throw new RequestValidationException(field, "sample rate is " + wav.sampleRate() + " Hz; "
                    + AudioInput.SAMPLE_RATE + " Hz is required (not resampled here: convert the file first, e.g."
                    + " ffmpeg -i IN -ar 16000 OUT.wav)");
        }
        if (wav.samples().length == 0) {
            throw new RequestValidationException(field, "the WAV file holds no samples");
        }
        checkDuration(field, wav.seconds());
        return new AudioInput(wav.samples(), language, task, a.getTimestamps());
    }

    private void checkDuration(String field, double seconds) {
        if (seconds > maxDuration.toMillis() / 1000.0) {
            throw new RequestValidationException(field, String.format("audio of %.1f s is longer than %s allows (%s)",
                    seconds, GenerateOptions.AUDIO_MAX_DURATION.key(), maxDuration));
        }
    }

    private static WavAudio decode(String field, byte[] bytes) {
        try {
            return WavDecoder.decode(bytes);
        } catch (WavFormatException e) {
            throw new RequestValidationException(field, e.getMessage());
        }
    }

    /** The referenced file's bytes, after checking that it lies inside the audio folder and that its header's length is allowed. */
    private byte[] read(String path) {
        if (dir == null) {
            throw new RequestValidationException("audio.path", "audio by path is off on this server ("
                    + GenerateOptions.AUDIO_DIR.key() + " is not set): send the WAV inline");
        }
        try {
            Path root = Path.of(dir).toRealPath();
            Path file = root.resolve(path).normalize();
            if (!file.startsWith(root) || !(file = file.toRealPath()).startsWith(root)) {
                throw new RequestValidationException("audio.path", "'" + path + "' is outside "
                        + GenerateOptions.AUDIO_DIR.key());
            }
            if (!Files.isRegularFile(file)) {
                throw new RequestValidationException("audio.path", "'" + path + "' is not a file");
            }
            checkDuration("audio.path", WavDecoder.declaredSeconds(file));
            return Files.readAllBytes(file);
        } catch (WavFormatException e) {
            throw new RequestValidationException("audio.path", e.getMessage());
        } catch (NoSuchFileException e) {
            throw new RequestValidationException("audio.path", "no such file: '" + path + "'");
        } catch (IOException e) {
            throw new RequestValidationException("audio.path", "cannot read '" + path + "': " + e.getMessage());
        }
    }

    private static byte[] bytes(ByteBuffer buffer) {
        ByteBuffer b = buffer.duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }
}
