package org.mstar.sql.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.mstar.model.ModelConfig;
import org.mstar.model.tokenizer.ByteLevelBpeTokenizerJson;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * A model folder with a tokenizer, which text prompts need. The benchmark's random weights come from a folder with
 * config.json alone (the token-id sides need no tokenizer, and loading one would change their engines), so the SQL
 * side serves a copy of that config beside the synthetic tokenizer random checkpoints carry. The engines still share
 * one copy of the weights: random weights are keyed by the config, not by its folder.
 */
final class TextModelFolder {
    private TextModelFolder() {}

    /** {@code modelDir} itself when it has a tokenizer, else a copy with one under {@code work}. */
    static Path of(Path modelDir, Path work) throws IOException {
        if (Files.isRegularFile(modelDir.resolve(TextTokenizer.FILE_NAME))) {
            return modelDir;
        }
        Path dir = work.resolve("sql-model");
        if (!Files.isRegularFile(dir.resolve(TextTokenizer.FILE_NAME))) {
            Files.createDirectories(dir);
            Files.copy(modelDir.resolve(ModelConfig.FILE_NAME), dir.resolve(ModelConfig.FILE_NAME));
            ModelConfig config = ModelConfig.load(dir);
            ByteLevelBpeTokenizerJson.write(dir.resolve(TextTokenizer.FILE_NAME), config.vocabSize(),
                    config.bosTokenId(), config.eosTokenIds());
        }
        return dir;
    }
}
