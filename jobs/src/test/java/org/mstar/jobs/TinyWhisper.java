package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.whisper.audio.TestWavs;

/**
 * The tiny random-weight Whisper checkpoint of the operators' test resources (written by
 * scripts/fixtures/write_whisper_fixtures.py), copied into a folder, and its clips as WAV files.
 */
final class TinyWhisper {
    private static final String RESOURCES = "/org/mstar/model/fixtures/whisper/";
    private static final List<String> MODEL_FILES = List.of("config.json", "generation_config.json",
            "model.safetensors", "tokenizer.json", "tokenizer_config.json");

    private TinyWhisper() {}

    /** Copies the checkpoint into {@code dir} (created) and returns it. */
    static Path copyTo(Path dir) throws IOException {
        Files.createDirectories(dir);
        for (String file : MODEL_FILES) {
            copy(file, dir);
        }
        return dir;
    }

    /**
     * A fixture clip ("tone": 2 s, "noise": 3 s) as a 32-bit float WAV, so that decoding it gives exactly the samples
     * transformers' references were computed from.
     */
    static byte[] clipWav(String clip, Path scratch) throws IOException {
        Path reference = copy("reference.safetensors", Files.createDirectories(scratch));
        try (SafetensorsFile f = SafetensorsFile.open(reference)) {
            ByteBuffer samples = f.bytes("audio." + clip).order(ByteOrder.LITTLE_ENDIAN);
            byte[] frames = new byte[samples.remaining()];
            samples.get(frames);
            return TestWavs.wav(3, 1, 32, 16_000, frames);
        }
    }

    private static Path copy(String file, Path dir) throws IOException {
        try (InputStream in = TinyWhisper.class.getResourceAsStream(RESOURCES + file)) {
            if (in == null) {
                throw new IOException("test resource " + RESOURCES + file + " is missing");
            }
            Path target = dir.resolve(file);
            Files.copy(in, target, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            return target;
        }
    }
}
