package org.mstar.model.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class TextTokenizerTest {
    private static final int VOCAB = 1024;
    private static final int BOS = 1000;
    private static final int EOS = 1001;

    @TempDir
    static Path dir;
    static TextTokenizer tokenizer;

    @BeforeAll
    static void load() throws IOException {
        ByteLevelBpeTokenizerJson.write(dir.resolve(TextTokenizer.FILE_NAME), VOCAB, OptionalInt.of(BOS), List.of(EOS));
        tokenizer = TextTokenizer.load(dir);
    }

    @AfterAll
    static void close() {
        tokenizer.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "The time is now, and all of the people have been there before.",
        "naïve café, Øresund, ß",
        "流式处理大型语言模型",
        "llamas 🦙 and rockets 🚀 and a family 👨‍👩‍👧",
        "tabs\tand\nnewlines\r\n  double  spaces ",
        ""})
    void textRoundTripsWithBosFromThePostProcessor(String text) {
        int[] ids = tokenizer.encode(text);

        assertThat(ids[0]).isEqualTo(BOS);
        assertThat(ids).doesNotContain(EOS);
        assertThat(tokenizer.decode(ids)).isEqualTo(text);
        int[] plain = tokenizer.encode(text, false);
        assertThat(plain).hasSize(ids.length - 1);
        assertThat(tokenizer.decode(plain)).isEqualTo(text);
    }

    @Test
    void pinsTheBundledCpuBuildSoAGpuMachineNeverDownloadsOne() {
        assertThat(System.getProperty(TextTokenizer.FLAVOR_PROPERTY)).isEqualTo("cpu");
        assertThat(System.getProperty(TextTokenizer.OFFLINE_PROPERTY)).isEqualTo("true");
    }

    @Test
    void mergesShortenEnglish() {
        String text = "The people have been there before";
        assertThat(tokenizer.encode(text, false).length).isLessThan(text.length() / 3);
    }

    @Test
    void longTextIsNeverTruncated() {
        String text = "one more word, ".repeat(800);
        int[] ids = tokenizer.encode(text);

        assertThat(ids.length).isGreaterThan(2000);
        assertThat(tokenizer.decode(ids)).isEqualTo(text);
    }

    @Test
    void specialTokensAreSkippedInDecodeAndMatchedInText() {
        assertThat(tokenizer.decode(new int[] {BOS, 'h', EOS})).isEqualTo("h"); // byte b has id b here
        assertThat(tokenizer.encode("<|begin_of_text|>hi<|end_of_text|>", false)).startsWith(BOS).endsWith(EOS);
    }

    private static List<String> stream(IncrementalDetokenizer detokenizer, int[] ids) {
        List<String> deltas = new ArrayList<>();
        for (int id : ids) {
            deltas.add(detokenizer.push(id));
        }
        deltas.add(detokenizer.finish());
        return deltas;
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "Hello world, this is a stream.",
        "流式处理 🦙🚀 naïve",
        "👨‍👩‍👧 family emoji made of several code points"})
    void deltasConcatenateToTheFullDecodeAndNeverSplitACharacter(String text) {
        int[] ids = tokenizer.encode(text);

        List<String> deltas = stream(tokenizer.detokenizer(), ids);

        assertThat(String.join("", deltas)).isEqualTo(tokenizer.decode(ids)).isEqualTo(text);
        assertThat(deltas).noneMatch(d -> d.contains("\uFFFD"));
    }

    @Test
    void aMultiByteCharacterIsHeldUntilItsLastByte() {
        int[] ids = tokenizer.encode("🦙", false); // four byte tokens
        assertThat(ids).hasSize(4);

        IncrementalDetokenizer d = tokenizer.detokenizer();

        assertThat(d.push(ids[0])).isEmpty();
        assertThat(d.push(ids[1])).isEmpty();
        assertThat(d.push(ids[2])).isEmpty();
        assertThat(d.push(ids[3])).isEqualTo("🦙");
        assertThat(d.finish()).isEmpty();
    }

    @Test
    void randomIdsIncludingBrokenUtf8StillConcatenateToTheFullDecode() {
        Random random = new Random(7);
        for (int trial = 0; trial < 300; trial++) {
            int[] ids = new int[1 + random.nextInt(30)];
            for (int i = 0; i < ids.length; i++) {
                // mostly byte tokens (where UTF-8 breaks), some merges and special ids
                ids[i] = random.nextInt(4) == 0 ? random.nextInt(VOCAB) : random.nextInt(256);
            }
            assertThat(String.join("", stream(tokenizer.detokenizer(), ids)))
                    .as("ids %s", java.util.Arrays.toString(ids))
                    .isEqualTo(tokenizer.decode(ids));
        }
    }

    @Test
    void promptContextGivesTheTextAfterThePrompt() {
        int[] prompt = tokenizer.encode("Say it: 流");
        int[] all = tokenizer.encode("Say it: 流式 🦙 done");
        int[] generated = java.util.Arrays.copyOfRange(all, prompt.length, all.length);
        assertThat(java.util.Arrays.copyOf(all, prompt.length)).isEqualTo(prompt);

        String text = String.join("", stream(tokenizer.detokenizer(prompt), generated));

        assertThat(text).isEqualTo("式 🦙 done");
    }

    @Test
    void everyIdOfTheDeclaredVocabularyDecodes(@TempDir Path other) throws IOException {
        int vocab = 2000;
        ByteLevelBpeTokenizerJson.write(other.resolve(TextTokenizer.FILE_NAME), vocab, OptionalInt.of(5), List.of(6, 1999));

        assertThat(ByteLevelBpeTokenizerJson.create(vocab, OptionalInt.of(5), List.of(6, 1999)).get("model").get("vocab")
                .size()).isEqualTo(vocab);
        try (TextTokenizer t = TextTokenizer.load(other)) {
            assertThat(t.encode("a")).containsExactly(5, 'a' + 2); // ids 0..4 are bytes 0..4, 5 and 6 the specials
            assertThat(t.encode("<|end_of_text|><|end_of_text_1|>", false)).containsExactly(6, 1999);
            for (int id = 0; id < vocab; id++) {
                String text = t.decode(new int[] {id});
                if (id == 5 || id == 6 || id == 1999) {
                    assertThat(text).as("special id %d", id).isEmpty();
                } else {
                    assertThat(text).as("id %d", id).isNotEmpty();
                }
            }
            assertThat(t.decode(new int[] {1998})).matches(" [a-z]{4,}"); // a made-up word past the merges
        }
    }

    @Test
    void tooSmallVocabulariesAndOutOfRangeIdsAreRejected() {
        assertThatThrownBy(() -> ByteLevelBpeTokenizerJson.create(257, OptionalInt.of(0), List.of(1)))
                .hasMessageContaining("a byte-level tokenizer needs 256");
        assertThatThrownBy(() -> ByteLevelBpeTokenizerJson.create(VOCAB, OptionalInt.of(VOCAB), List.of()))
                .hasMessageContaining("special token id 1024 is outside the vocabulary");
    }

    @Test
    void withoutBosNothingIsPrepended(@TempDir Path other) throws IOException {
        ByteLevelBpeTokenizerJson.write(other.resolve(TextTokenizer.FILE_NAME), 300, OptionalInt.empty(), List.of(299));
        try (TextTokenizer t = TextTokenizer.load(other.resolve(TextTokenizer.FILE_NAME))) {
            byte[] utf8 = "ab".getBytes(StandardCharsets.UTF_8);
            assertThat(t.encode("ab")).hasSize(utf8.length);
            assertThat(t.decode(t.encode("ab"))).isEqualTo("ab");
        }
    }
}
