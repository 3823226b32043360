package org.mstar.resources.constraint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.concurrent.ForkJoinPool;
import org.junit.jupiter.api.Test;

/** Tokens against the byte automaton: multi-character tokens, tokens that split a UTF-8 character, end ids. */
class TokenAutomatonTest {
    /** Id of a vocabulary word: after the end ids and the 256 bytes. */
    private static int word(int eosCount, int index) {
        return eosCount + 256 + index;
    }

    private static int byteToken(int eosCount, int b) {
        return eosCount + (b & 0xFF);
    }

    @Test
    void aTokenMayEndInsideACharacterAndTheNextOneFinishesIt() {
        // "é" is C3 A9; "€" is E2 82 AC
        TokenVocabulary v = TestVocabularies.bytesAnd(List.of("é", "\"é", "é\""), 1);
        TokenAutomaton a = ConstraintCompiler.compile(OutputConstraint.regex("\"[é€]+\""), v);
        int s = a.next(a.start(), byteToken(1, '"'));
        assertThat(TestVocabularies.allowed(a, s, byteToken(1, 0xC3))).isTrue();
        assertThat(TestVocabularies.allowed(a, s, byteToken(1, 0xE2))).isTrue();
        assertThat(TestVocabularies.allowed(a, s, byteToken(1, 0xA9))).as("a continuation byte cannot start").isFalse();
        assertThat(TestVocabularies.allowed(a, s, word(1, 2))).as("é\" closes a non-empty string").isTrue();
        assertThat(TestVocabularies.allowed(a, s, byteToken(1, '"'))).as("the string needs a character").isFalse();
        int half = a.next(s, byteToken(1, 0xC3));
        assertThat(TestVocabularies.allowedTexts(a, half, v)).isEmpty(); // only the byte A9 (not text on its own)
        assertThat(TestVocabularies.allowed(a, half, byteToken(1, 0xA9))).isTrue();
        assertThat(TestVocabularies.allowed(a, half, byteToken(1, 0x82))).isFalse();
        int whole = a.next(half, byteToken(1, 0xA9));
        assertThat(whole).isEqualTo(a.next(s, word(1, 0)));
        assertThat(TestVocabularies.allowed(a, whole, 0)).as("no end before the closing quote").isFalse();
        int closed = a.next(whole, byteToken(1, '"'));
        assertThat(a.accepting(closed)).isTrue();
        assertThat(TestVocabularies.allowed(a, closed, 0)).isTrue();
        assertThat(a.continues(closed)).isFalse();
    }

    @Test
    void endIdsOnlyWhereTheOutputMayEnd() {
        TokenVocabulary v = TestVocabularies.bytesAnd(List.of("ab", "abab"), 2);
        TokenAutomaton a = ConstraintCompiler.compile(OutputConstraint.regex("(ab)+"), v);
        assertThat(TestVocabularies.allowedTexts(a, a.start(), v)).containsExactlyInAnyOrder("a", "ab", "abab");
        int s = a.next(a.start(), word(2, 0));
        assertThat(TestVocabularies.allowedTexts(a, s, v)).containsExactlyInAnyOrder("<eos>", "<eos>", "a", "ab", "abab");
        assertThat(a.continues(s)).isTrue();
        assertThat(a.next(s, 1)).isEqualTo(s);
        assertThatThrownBy(() -> a.next(a.start(), 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> a.next(a.start(), byteToken(2, 'b'))).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void everyMaskAgreesWithWalkingEachTokenAlone() {
        TokenVocabulary v = TestVocabularies.bytesAnd(List.of("{\"", "\":", "\",\"", "true", "tru", "null", "12", "1.5",
                "é", "😀", "\"}", "}", "]", "[\"", "\\u00", "\\n"), 1);
        String schema = """
                {"type":"object","properties":{"a":{"type":"string","maxLength":3},
                 "b":{"type":"array","items":{"type":"number"},"maxItems":2},"c":{"enum":[true,null,"x"]}},
                 "required":["a"]}""";
        TokenAutomaton a = ConstraintCompiler.compile(OutputConstraint.jsonSchema(schema), v);
        for (int state = 0; state < a.states(); state++) {
            int[] mask = a.mask(state);
            for (int id = 1; id < v.size(); id++) {
                int s = walk(a, state, id);
                assertThat((mask[id >>> 5] >>> (id & 31) & 1) != 0).as("state %d token %d", state, id).isEqualTo(s >= 0);
            }
            assertThat((mask[0] & 1) != 0).isEqualTo(a.accepting(state));
        }
    }

    @Test
    void prefetchComputesTheSameMask() throws Exception {
        TokenVocabulary v = TestVocabularies.bytesAnd(List.of("ab", "ba"), 1);
        TokenAutomaton fresh = ConstraintCompiler.compile(OutputConstraint.regex("[ab]{3,5}c"), v);
        TokenAutomaton other = ConstraintCompiler.compile(OutputConstraint.regex("[ab]{3,5}c"), v);
        int s = fresh.next(fresh.start(), word(1, 0));
        fresh.prefetch(s, ForkJoinPool.commonPool());
        assertThat(ForkJoinPool.commonPool().awaitQuiescence(10, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        assertThat(fresh.mask(s)).isEqualTo(other.mask(other.next(other.start(), word(1, 0))));
    }

    private static int walk(TokenAutomaton a, int state, int id) {
        try {
            return a.next(state, id);
        } catch (IllegalArgumentException e) {
            return -1;
        }
    }
}
