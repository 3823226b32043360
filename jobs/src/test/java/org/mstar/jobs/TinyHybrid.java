package org.mstar.jobs;

import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.IntBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.mstar.model.io.SafetensorsFile;

/**
 * The tiny random-weight Mamba2 and Bamba checkpoints of the operators' test resources (written by
 * scripts/fixtures/write_model_fixtures.py with transformers), copied into a folder, and transformers' greedy
 * continuation of each of their three prompts.
 */
final class TinyHybrid {
    /** Prompts (token ids) and transformers' greedy tokens after each, 120 a prompt. */
    record Reference(List<int[]> prompts, List<int[]> tokens) {}

    private TinyHybrid() {}

    /** Copies checkpoint {@code arch} ("mamba2" or "bamba") into {@code dir} (created) and returns it. */
    static Path copyTo(String arch, Path dir) throws IOException {
        return FixtureFiles.copyModel(arch, dir);
    }

    /** The reference of checkpoint {@code arch}, read from a copy written under {@code scratch}. */
    static Reference reference(String arch, Path scratch) throws IOException {
        Path file = FixtureFiles.copy(arch, "reference.safetensors", Files.createDirectories(scratch));
        List<int[]> prompts = new ArrayList<>();
        List<int[]> tokens = new ArrayList<>();
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            for (int p = 0; f.contains("prompt." + p); p++) {
                prompts.add(ints(f, "prompt." + p));
                tokens.add(ints(f, "tokens." + p));
            }
        }
        return new Reference(prompts, tokens);
    }

    private static int[] ints(SafetensorsFile f, String name) throws IOException {
        IntBuffer b = f.bytes(name).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[b.remaining()];
        b.get(out);
        return out;
    }
}
