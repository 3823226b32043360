package org.mstar.resources.constraint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Random;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.resources.RequestValidationException;

/**
 * The regular-expression corpus: each expression's byte automaton accepts exactly what {@link Pattern#matches}
 * accepts, both on strings drawn from the automaton and on random strings over an alphabet that includes
 * multi-byte and supplementary characters.
 */
class RegexLanguageTest {
    private static final String ALPHABET = "ab09 _-.\"\\{}[]:,xyzé€😀\n";

    @ParameterizedTest
    @ValueSource(strings = {
            "abc", "a|b|cd", "(ab)*c", "[a-z]+", "[^a-z]+", "\\d{3}-\\d{4}", "\\w+@\\w+\\.com",
            "(?:yes|no|maybe)", "a{2,4}b{0,}", "x?y+z*", "[\\s\\d]*", "\\S+", "\\D\\W", ".{1,3}", ".*é.*",
            "(?<word>[a-z]+)(,[a-z]+)*", "[-a]+", "[a-]+", "\\u00e9|\\x41", "😀+|€", "^start.*end$",
            "\\{\"k\":\\d+\\}", "[.]\\.", "\\t\\n", "a*?b", "(a|ab)(c|bcd)(d*)"})
    void matchesExactlyWhatJavaMatches(String regex) {
        ByteDfa dfa = ByteDfa.fromUtf16(RegexLanguage.of(regex), 10_000);
        Pattern p = Pattern.compile(regex);
        DfaWalks walks = new DfaWalks(dfa);
        Random rnd = new Random(regex.hashCode());
        for (int i = 0; i < 200; i++) {
            String s = new String(walks.walk(rnd, 12), StandardCharsets.UTF_8);
            assertThat(p.matcher(s).matches()).as("%s should match %s", regex, s).isTrue();
        }
        int[] cps = ALPHABET.codePoints().toArray();
        for (int i = 0; i < 2000; i++) {
            StringBuilder sb = new StringBuilder();
            int len = rnd.nextInt(6);
            for (int j = 0; j < len; j++) {
                sb.appendCodePoint(cps[rnd.nextInt(cps.length)]);
            }
            String s = sb.toString();
            assertThat(walks.accepts(s.getBytes(StandardCharsets.UTF_8))).as("%s on '%s'", regex, s)
                    .isEqualTo(p.matcher(s).matches());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"(a)\\1", "a(?=b)", "(?i)abc", "a++", "\\bword", "\\p{L}", "[a-z&&[^c]]", "a(?!b)"})
    void refusesWhatItWouldReadOtherwise(String regex) {
        assertThatThrownBy(() -> RegexLanguage.of(regex)).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith("regex: unsupported");
    }

    @ParameterizedTest
    @ValueSource(strings = {"(ab", "a{2", "[a-"})
    void namesSyntaxErrors(String regex) {
        assertThatThrownBy(() -> RegexLanguage.of(regex)).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith("regex: invalid regular expression");
    }

    @org.junit.jupiter.api.Test
    void choicesAreExactStrings() {
        TokenVocabulary v = TestVocabularies.bytesAnd(List.of("yes", "no"), 1);
        TokenAutomaton a = ConstraintCompiler.compile(OutputConstraint.choice(List.of("yes", "no", "nope")), v);
        assertThat(TestVocabularies.allowedTexts(a, a.start(), v)).containsExactlyInAnyOrder("y", "n", "yes", "no");
    }
}
