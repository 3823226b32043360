package org.mstar.sql.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.model.ModelConfig;
import org.mstar.model.tokenizer.TextTokenizer;

class TokenLengthPromptsTest {
    @Test
    void everyPromptEncodesToItsLengthAndRequestsGetDifferentText(@TempDir Path work) throws Exception {
        // the random 8B geometry's folder: config.json only, as bench-serving --random writes it
        Path random = work.resolve("random");
        Files.createDirectories(random);
        Files.copy(Path.of("..", "scripts", "gpu", "llama-3.1-8b.json"),
                random.resolve(ModelConfig.FILE_NAME));
        try (TextTokenizer tokenizer = TextTokenizer.load(TextModelFolder.of(random, work))) {
            TokenLengthPrompts prompts = new TokenLengthPrompts(tokenizer,
                    ModelConfig.load(random).vocabSize());
            assertThat(tokenizer.encode(prompts.prompt(0, 2))).hasSize(2);
            for (int tokens : new int[] {128, 1000}) {
                assertThat(IntStream.range(0, 20).mapToObj(i -> prompts.prompt(i, tokens)))
                        .allSatisfy(p -> assertThat(tokenizer.encode(p)).hasSize(tokens))
                        .doesNotHaveDuplicates();
            }
            assertThat(prompts.prompt(3, 128)).isEqualTo(prompts.prompt(3, 128));
            assertThatThrownBy(() -> prompts.prompt(0, 1)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("no room for a word");
        }
    }
}
