package org.mstar.jobs;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.whisper.audio.TestWavs;

/**
 * The tiny random-weight Whisper checkpoint of the operators' test resources (written by
 * scripts/fixtures/write_whisper_fixtures.py), copied into a folder, and its clips as WAV files.
 */
final class TinyWhisper {
    private TinyWhisper() {}

    /** Copies the checkpoint into {@code dir} (created) and returns it. */
    static Path copyTo(Path dir) throws IOException {
        return FixtureFiles.copyModel("whisper", dir);
    }

    /**
     * A fixture clip ("tone": 2 s, "noise": 3 s) as a 32-bit float WAV, so that decoding it gives exactly the samples
     * transformers' references were computed from.
     */
    static byte[] clipWav(String clip, Path scratch) throws IOException {
        Path reference = FixtureFiles.copy("whisper", "reference.safetensors", Files.createDirectories(scratch));
        try (SafetensorsFile f = SafetensorsFile.open(reference)) {
            ByteBuffer samples = f.bytes("audio." + clip).order(ByteOrder.LITTLE_ENDIAN);
            byte[] frames = new byte[samples.remaining()];
            samples.get(frames);
            return TestWavs.wav(3, 1, 32, 16_000, frames);
        }
    }
}
