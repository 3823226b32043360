package org.mstar.model.whisper;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.model.ModelFormatException;
import org.mstar.resources.RequestValidationException;

/** Reading a Whisper folder, the prompts it gives, and transformers' timestamp rules. */
class WhisperConfigTest {
    private static final Path FIXTURE = Path.of("src/test/resources/org/mstar/model/fixtures/whisper");
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void readsTheFixturesGeometryAndGenerationTokens() throws Exception {
        WhisperConfig c = WhisperConfig.load(FIXTURE);
        assertThat(WhisperConfig.isWhisper(FIXTURE)).isTrue();
        assertThat(c.dModel()).isEqualTo(64);
        assertThat(c.numMelBins()).isEqualTo(80);
        assertThat(c.eosTokenId()).isEqualTo(320);
        assertThat(c.decoderStartTokenId()).isEqualTo(321);
        assertThat(c.langToId()).containsEntry("en", 322).containsEntry("de", 324).hasSize(6);
        assertThat(c.taskToId()).isEqualTo(Map.of("translate", 328, "transcribe", 329));
        assertThat(c.timestampBegin()).isEqualTo(334);
        assertThat(c.beginSuppressTokens()).containsExactly(220, 320);
    }

    @Test
    void idsGenerationConfigLacksComeFromTheTokenizersSpecialTokens(@TempDir Path dir) throws Exception {
        WhisperConfig full = WhisperConfig.load(FIXTURE);
        copy(dir, "config.json", "tokenizer.json");
        generationConfigWithout(dir, "lang_to_id", "task_to_id", "no_timestamps_token_id", "prev_sot_token_id");

        WhisperConfig derived = WhisperConfig.load(dir);

        assertThat(derived.multilingual()).isTrue();
        assertThat(derived.langToId()).isEqualTo(full.langToId()).hasSize(6);
        assertThat(derived.taskToId()).isEqualTo(full.taskToId());
        assertThat(derived.noTimestampsTokenId()).isEqualTo(333);
        assertThat(derived.prevSotTokenId()).isEqualTo(331);
    }

    @Test
    void anEnglishOnlyModelForcesNoLanguageOrTask(@TempDir Path dir) throws Exception {
        copy(dir, "config.json", "tokenizer.json");
        ObjectNode g = generationConfigWithout(dir, "lang_to_id", "task_to_id", "no_timestamps_token_id");
        g.put("is_multilingual", false);
        Files.writeString(dir.resolve("generation_config.json"), g.toString());

        WhisperConfig c = WhisperConfig.load(dir);
        WhisperPrompts p = new WhisperPrompts(c);

        assertThat(c.multilingual()).isFalse();
        assertThat(c.langToId()).isEmpty();
        assertThat(p.languageToken(null)).isEqualTo(-1);
        assertThat(p.languageToken("en")).isEqualTo(-1);
        assertThat(p.detectsLanguage(-1)).isFalse();
        assertThat(p.tail(p.languageToken("en"), p.taskToken(null), false)).containsExactly(333);
        assertThat(p.tail(-1, p.taskToken("transcribe"), true)).isEmpty();
        assertThatThrownBy(() -> p.languageToken("de")).isInstanceOf(RequestValidationException.class)
                .hasMessageContaining("audio.language").hasMessageContaining("English-only");
        assertThatThrownBy(() -> p.taskToken("translate")).isInstanceOf(RequestValidationException.class)
                .hasMessageContaining("audio.task").hasMessageContaining("only transcribes");
    }

    @Test
    void aFolderOlderThanGenerationConfigReadsConfigJsonAndTheTokenizer(@TempDir Path dir) throws Exception {
        copy(dir, "config.json", "tokenizer.json");

        WhisperConfig c = WhisperConfig.load(dir);

        // a vocabulary below openai's multilingual 51865 tokens, and nothing saying otherwise: English-only
        assertThat(c.multilingual()).isFalse();
        assertThat(c.decoderStartTokenId()).isEqualTo(321);
        assertThat(c.eosTokenId()).isEqualTo(320);
        assertThat(c.noTimestampsTokenId()).isEqualTo(333);
        assertThat(c.beginSuppressTokens()).containsExactly(220, 50256);
        Files.writeString(dir.resolve("config.json"), "{\"model_type\": \"llama\"}");
        assertThat(WhisperConfig.isWhisper(dir)).isFalse();
    }

    @Test
    void whatNeitherFileGivesIsRefusedInOneLineNamingBoth(@TempDir Path dir) throws Exception {
        copy(dir, "config.json");
        generationConfigWithout(dir, "lang_to_id");
        Files.writeString(dir.resolve("tokenizer.json"), "{\"added_tokens\": []}");
        assertThatThrownBy(() -> WhisperConfig.load(dir)).isInstanceOf(ModelFormatException.class)
                .hasMessage(dir + ": generation_config.json has no lang_to_id, and tokenizer.json has no <|en|>-like"
                        + " language tokens between <|startoftranscript|> and <|translate|> to derive it from");

        Files.delete(dir.resolve("tokenizer.json"));
        Files.delete(dir.resolve("generation_config.json"));
        assertThatThrownBy(() -> WhisperConfig.load(dir)).isInstanceOf(ModelFormatException.class)
                .hasMessage(dir + ": generation_config.json has no no_timestamps_token_id, and there is no"
                        + " tokenizer.json to derive it from");
    }

    private static void copy(Path dir, String... files) throws IOException {
        for (String f : files) {
            Files.copy(FIXTURE.resolve(f), dir.resolve(f));
        }
    }

    /** Writes the fixture's generation_config.json without {@code keys} into {@code dir}; returns what it wrote. */
    private static ObjectNode generationConfigWithout(Path dir, String... keys) throws IOException {
        ObjectNode g = (ObjectNode) JSON.readTree(FIXTURE.resolve("generation_config.json").toFile());
        g.remove(List.of(keys));
        Files.writeString(dir.resolve("generation_config.json"), g.toString());
        return g;
    }

    @Test
    void promptsFollowWhispersLayout() throws Exception {
        WhisperPrompts p = new WhisperPrompts(WhisperConfig.load(FIXTURE));
        assertThat(p.head(new int[0])).containsExactly(321);
        assertThat(p.head(new int[] {5, 6})).containsExactly(331, 5, 6, 321);
        assertThat(p.tail(p.languageToken("en"), p.taskToken(null), false)).containsExactly(322, 329, 333);
        assertThat(p.tail(p.languageToken("de"), p.taskToken("translate"), true)).containsExactly(324, 328);
        assertThat(p.languageToken(null)).isEqualTo(-1);
        assertThatThrownBy(() -> p.languageToken("klingon")).isInstanceOf(RequestValidationException.class)
                .hasMessageContaining("audio.language").hasMessageContaining("[de, en, es, fr, ru, zh]");
        assertThat(WhisperPrompts.windows(new float[30 * 16_000 + 1])).extracting(w -> w.length)
                .containsExactly(30 * 16_000, 1);
    }

    @Test
    void timestampRulesAsTransformersAppliesThem() throws Exception {
        WhisperConfig c = WhisperConfig.load(FIXTURE);
        TimestampRules rules = new TimestampRules(c);
        int ts = c.timestampBegin();
        float[] flat = new float[c.vocabSize()];

        // first token: a timestamp no later than the initial limit (50 steps of 20 ms)
        boolean[] first = rules.disallowed(new int[0], flat);
        assertThat(allowed(first)).allMatch(i -> i >= ts && i <= ts + 50);
        // after one lone timestamp: no timestamp may follow, text may
        boolean[] afterOne = rules.disallowed(new int[] {ts + 3}, flat);
        assertThat(afterOne[ts + 4]).isTrue();
        assertThat(afterOne[10]).isFalse();
        // text after the opening timestamp: the closing one may not go back in time, nor text be ruled out
        boolean[] closing = rules.disallowed(new int[] {ts + 3, 10}, flat);
        assertThat(closing[ts + 3]).isTrue();
        assertThat(closing[ts + 4]).isFalse();
        // right after a closing timestamp of a pair: only timestamps (from that one on) or the end
        float[] endLikely = new float[c.vocabSize()];
        endLikely[c.eosTokenId()] = 20f;
        boolean[] afterPair = rules.disallowed(new int[] {ts + 3, 10, ts + 8}, endLikely);
        assertThat(afterPair[10]).isTrue();
        assertThat(afterPair[c.eosTokenId()]).isFalse();
        assertThat(afterPair[ts + 8]).isFalse();
        assertThat(afterPair[ts + 7]).isTrue();
        // timestamps likelier together than the best text token: a timestamp must be drawn
        float[] logits = new float[c.vocabSize()];
        logits[10] = 2f;
        boolean[] mass = rules.disallowed(new int[] {10}, logits);
        assertThat(mass[10]).isTrue();
        assertThat(allowed(mass)).allMatch(i -> i >= ts);
        assertThat(mass[c.noTimestampsTokenId()]).isTrue();
    }

    private static List<Integer> allowed(boolean[] disallowed) {
        return java.util.stream.IntStream.range(0, disallowed.length).filter(i -> !disallowed[i]).boxed().toList();
    }
}
