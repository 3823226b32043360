package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.InstantiationUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.AudioInput;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.model.ModelFormatException;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.resources.RequestValidationException;

/**
 * A job that names a Whisper folder gets a Whisper engine from the default factory: audio in, transformers' greedy
 * tokens out (the tiny checkpoint's "transcribe_en" case); a text request to it is a 400. An English-only folder is
 * served without language or task tokens; one without tokenizer.json is refused rather than served as empty text.
 */
class WhisperEngineFactoryTest {
    private static final Path FIXTURE = Path.of("src/test/resources/org/mstar/model/fixtures/whisper");

    @Test
    void theDefaultFactoryServesAWhisperFolderWithTheWhisperEngine() throws Exception {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, FIXTURE.toString());
        conf.set(LlamaEngineOptions.PAGES, 2 * 122 + 1);
        EngineFactory factory = InstantiationUtil.clone(new LlamaEngineFactory(conf));
        float[] tone;
        int[] expected;
        try (SafetensorsFile ref = SafetensorsFile.open(FIXTURE.resolve("reference.safetensors"))) {
            var fb = ref.bytes("audio.tone").order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
            tone = new float[fb.remaining()];
            fb.get(tone);
            var ib = ref.bytes("transcribe_en.0.tokens").order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            expected = new int[ib.remaining()];
            ib.get(expected);
        }
        try (GenerationEngine engine = factory.create("cpu", 0)) {
            assertThatThrownBy(() -> engine.submit(GenerationRequest.builder("text").promptText("hello").maxTokens(5)
                    .build())).isInstanceOf(RequestValidationException.class).hasMessageStartingWith("audio:");
            engine.submit(GenerationRequest.builder("speech").audio(new AudioInput(tone, "en", "transcribe", false))
                    .maxTokens(expected.length).build());
            List<Integer> tokens = new ArrayList<>();
            while (engine.hasWork()) {
                StepResult r = engine.step();
                assertThat(r.failures()).isEmpty();
                r.tokens().stream().map(TokenOutput::tokenId).forEach(tokens::add);
            }
            assertThat(tokens).containsExactly(java.util.Arrays.stream(expected).boxed().toArray(Integer[]::new));
        }
    }

    @Test
    void anEnglishOnlyFolderIsPromptedWithoutLanguageOrTask(@TempDir Path dir) throws Exception {
        copyFixture(dir, "config.json", "tokenizer.json", "model.safetensors");
        ObjectNode g = (ObjectNode) new ObjectMapper().readTree(FIXTURE.resolve("generation_config.json").toFile());
        g.remove(List.of("lang_to_id", "task_to_id", "no_timestamps_token_id"));
        g.put("is_multilingual", false);
        Files.writeString(dir.resolve("generation_config.json"), g.toString());

        try (GenerationEngine engine = factory(dir).create("cpu", 0)) {
            assertThatThrownBy(() -> engine.submit(speech("de", 4))).isInstanceOf(RequestValidationException.class)
                    .hasMessageContaining("English-only");
            engine.submit(speech(null, 4));
            List<FinishedRequest> finished = new ArrayList<>();
            while (engine.hasWork()) {
                StepResult r = engine.step();
                assertThat(r.failures()).isEmpty();
                finished.addAll(r.finished());
            }
            // <|startoftranscript|> <|notimestamps|>: no language detected or forced, no task
            assertThat(finished).singleElement().satisfies(f -> {
                assertThat(f.promptTokens()).isEqualTo(2);
                assertThat(f.tokenIds()).hasSize(4);
            });
        }
    }

    @Test
    void aWhisperFolderWithoutItsTokenizerIsRefusedInsteadOfTranscribingToNothing(@TempDir Path dir)
            throws Exception {
        copyFixture(dir, "config.json", "generation_config.json", "model.safetensors");
        assertThatThrownBy(() -> factory(dir).create("cpu", 0)).isInstanceOf(ModelFormatException.class)
                .hasMessage(dir.resolve("tokenizer.json") + " is missing: a Whisper folder needs its tokenizer to turn"
                        + " the tokens into text");
    }

    private static EngineFactory factory(Path folder) {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, folder.toString());
        conf.set(LlamaEngineOptions.PAGES, 122 + 1);
        return new LlamaEngineFactory(conf);
    }

    private static GenerationRequest speech(String language, int maxTokens) throws Exception {
        try (SafetensorsFile ref = SafetensorsFile.open(FIXTURE.resolve("reference.safetensors"))) {
            return GenerationRequest.builder("speech")
                    .audio(new AudioInput(ref.floats("audio.tone"), language, null, false)).maxTokens(maxTokens)
                    .build();
        }
    }

    private static void copyFixture(Path dir, String... files) throws Exception {
        for (String f : files) {
            Files.copy(FIXTURE.resolve(f), dir.resolve(f));
        }
    }

    @Test
    void fp8KvPagesAreRefusedByName() {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, FIXTURE.toString());
        conf.set(LlamaEngineOptions.KV_CACHE_DTYPE, "fp8_e4m3");
        assertThatThrownBy(() -> new LlamaEngineFactory(conf)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'mstar.kv.cache-dtype' = fp8_e4m3 covers the Llama family only");
    }
}
