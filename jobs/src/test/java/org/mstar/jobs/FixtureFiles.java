package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;

/**
 * Model fixtures of the operators' test resources (under {@code /org/mstar/model/fixtures/}), copied out of the
 * class path into folders, as a user's model folder is one.
 */
final class FixtureFiles {
    /** The files of a Hugging Face model folder that the fixtures hold. */
    static final List<String> MODEL_FILES = List.of("config.json", "generation_config.json", "model.safetensors",
            "tokenizer.json", "tokenizer_config.json");

    private FixtureFiles() {}

    /** Copies fixture {@code name}'s model files into {@code dir} (created) and returns it. */
    static Path copyModel(String name, Path dir) throws IOException {
        Files.createDirectories(dir);
        for (String file : MODEL_FILES) {
            copy(name, file, dir);
        }
        return dir;
    }

    /** Copies one file of fixture {@code name} into {@code dir} and returns the copy. */
    static Path copy(String name, String file, Path dir) throws IOException {
        String resource = "/org/mstar/model/fixtures/" + name + "/" + file;
        try (InputStream in = FixtureFiles.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("test resource " + resource + " is missing");
            }
            Path target = dir.resolve(file);
            Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
            return target;
        }
    }
}
