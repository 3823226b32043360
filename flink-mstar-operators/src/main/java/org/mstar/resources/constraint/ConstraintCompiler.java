package org.mstar.resources.constraint;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.BasicAutomata;
import java.util.ArrayList;
import java.util.List;
import org.mstar.resources.RequestValidationException;

/**
 * Compiles an {@link OutputConstraint} for a vocabulary: the constraint's language over UTF-16 code units
 * ({@link JsonSchemaLanguage}, {@link RegexLanguage}, or the union of the choices), then its UTF-8 byte automaton
 * ({@link ByteDfa}), then the token automaton over the vocabulary.
 */
public final class ConstraintCompiler {
    /** Byte-automaton states a constraint may need; beyond it the request is refused (a mask per state is kept). */
    public static final int MAX_STATES = 50_000;

    private ConstraintCompiler() {}

    /**
     * @throws RequestValidationException (a 400) naming the constraint's field and the problem: a syntax error, an
     *     unsupported keyword or construct, a language too large, one that matches nothing or only the empty output,
     *     or one this vocabulary cannot spell
     */
    public static TokenAutomaton compile(OutputConstraint constraint, TokenVocabulary vocab) {
        String field = constraint.kind().field();
        Automaton chars = language(constraint);
        ByteDfa dfa;
        try {
            dfa = ByteDfa.fromUtf16(chars, MAX_STATES);
        } catch (IllegalArgumentException e) {
            throw new RequestValidationException(field, e.getMessage());
        }
        if (!dfa.moves(dfa.start())) {
            throw new RequestValidationException(field, dfa.accepting(dfa.start()) ? "matches only the empty output"
                    : "matches no output");
        }
        TokenAutomaton tokens = new TokenAutomaton(dfa, vocab);
        if (!tokens.allowsText(tokens.start())) {
            throw new RequestValidationException(field, "no token of this model's vocabulary can start a match");
        }
        return tokens;
    }

    /**
     * Checks what needs no model: that the constraint is one this library can compile (a client checks a schema
     * before sending it).
     *
     * @throws RequestValidationException as {@link #compile} for a syntax error or an unsupported keyword or construct
     */
    public static void check(OutputConstraint constraint) {
        language(constraint);
    }

    private static Automaton language(OutputConstraint constraint) {
        return switch (constraint.kind()) {
            case JSON_SCHEMA -> JsonSchemaLanguage.of(constraint.text());
            case REGEX -> RegexLanguage.of(constraint.text());
            case CHOICE -> choices(constraint.choices());
        };
    }

    private static Automaton choices(List<String> choices) {
        String field = OutputConstraint.Kind.CHOICE.field();
        if (choices.isEmpty()) {
            throw new RequestValidationException(field, "needs at least one choice");
        }
        List<Automaton> parts = new ArrayList<>();
        for (String c : choices) {
            if (c.isEmpty()) {
                throw new RequestValidationException(field, "choices must not be empty strings");
            }
            parts.add(BasicAutomata.makeString(c));
        }
        return Automaton.union(parts);
    }
}
