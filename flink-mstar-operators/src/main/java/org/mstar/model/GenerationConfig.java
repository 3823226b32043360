package org.mstar.model;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalInt;

/**
 * The special token ids generation needs, from {@code generation_config.json} where it declares them, else
 * from config.json. Instruct models often list several end tokens here (Llama 3.1: end_of_text, eom_id,
 * eot_id) while config.json names only one, so this is the list stop rules should use.
 *
 * @param bosTokenId the beginning-of-sequence id, when declared
 * @param eosTokenIds every id that ends generation
 */
public record GenerationConfig(OptionalInt bosTokenId, List<Integer> eosTokenIds) {

    /** The file name inside a model folder. */
    public static final String FILE_NAME = "generation_config.json";

    public GenerationConfig {
        eosTokenIds = List.copyOf(eosTokenIds);
    }

    /** The ids config.json declares, for folders without generation_config.json. */
    public static GenerationConfig of(ModelConfig config) {
        return new GenerationConfig(config.bosTokenId(), config.eosTokenIds());
    }

    /**
     * Reads {@code folder/generation_config.json}; a key it lacks, and the whole file when absent, falls back
     * to {@code config}.
     */
    public static GenerationConfig load(Path folder, ModelConfig config) throws IOException {
        return load(folder, of(config));
    }

    /** As {@link #load(Path, ModelConfig)}, falling back to {@code fallback}'s ids. */
    public static GenerationConfig load(Path folder, GenerationConfig fallback) throws IOException {
        Path file = folder.resolve(FILE_NAME);
        if (!Files.exists(file)) {
            return fallback;
        }
        return HfConfigJson.parseGenerationConfig(
                new ConfigFields(HfConfigJson.readFile(file), file.toString()), fallback);
    }

    public boolean isEos(int tokenId) {
        return eosTokenIds.contains(tokenId);
    }

    /** generation_config.json content that {@link #load} reads back to an equal config. */
    public ObjectNode toJson() {
        return HfConfigJson.writeGenerationConfig(this);
    }
}
