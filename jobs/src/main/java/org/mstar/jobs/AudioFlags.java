package org.mstar.jobs;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.mstar.schemas.Audio;
import picocli.CommandLine.Option;

/** The audio of speech-to-text requests that {@code send} produces: WAV files inline or by path, and their options. */
final class AudioFlags {
    /**
     * Largest WAV sent inline: under the producer's and the broker's default record limit of 1 MiB
     * (max.request.size, message.max.bytes), with room for the rest of the request.
     */
    static final long MAX_INLINE_BYTES = 1_000_000;

    @Option(names = "--audio", paramLabel = "FILE.wav",
            description = "Transcribe this WAV file (16 kHz), sent inline in the request: up to 1,000,000 bytes"
                    + " (Kafka's default record limit), about 30 s of 16-bit mono. Repeatable.")
    List<Path> files = new ArrayList<>();

    @Option(names = "--audio-path", paramLabel = "PATH",
            description = "Transcribe a WAV file that the job reads itself: a path inside serve's --audio-dir"
                    + " (relative to it, or absolute). Repeatable.")
    List<String> paths = new ArrayList<>();

    @Option(names = "--language", paramLabel = "CODE", description = "Spoken language (en, de, ...). Default: detected.")
    String language;

    @Option(names = "--task", paramLabel = "TASK", description = "transcribe (default) or translate (into English).")
    String task;

    @Option(names = "--timestamps", description = "Ask for timestamp tokens in the transcript.")
    boolean timestamps;

    boolean any() {
        return !files.isEmpty() || !paths.isEmpty();
    }

    /** One {@link Audio} per file and path, in that order. */
    List<Audio> audio() {
        List<Audio> out = new ArrayList<>();
        for (Path file : files) {
            out.add(options().setWav(ByteBuffer.wrap(read(file))).build());
        }
        for (String path : paths) {
            out.add(options().setPath(path).build());
        }
        return out;
    }

    private Audio.Builder options() {
        return Audio.newBuilder().setLanguage(language).setTask(task).setTimestamps(timestamps);
    }

    private static byte[] read(Path file) {
        try {
            long size = Files.size(file);
            if (size > MAX_INLINE_BYTES) {
                throw new IllegalArgumentException("--audio " + file + ": " + size + " bytes, more than the "
                        + MAX_INLINE_BYTES + " that fit in one Kafka record; put it in serve's --audio-dir and send"
                        + " --audio-path instead");
            }
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new IllegalArgumentException("--audio " + file + ": cannot read it (" + e + ")");
        }
    }
}
