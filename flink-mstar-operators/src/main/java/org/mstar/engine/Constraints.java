package org.mstar.engine;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.constraint.ConstraintCache;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.resources.constraint.TokenAutomaton;
import org.mstar.resources.constraint.TokenVocabulary;

/**
 * The engine's compiled structured-output constraints: the vocabulary's token bytes are read from the tokenizer
 * the first time a request is constrained, and each constraint is compiled once and kept ({@link ConstraintCache}).
 */
final class Constraints {
    /** Distinct constraints kept compiled. */
    static final int CACHED = 256;

    /** Null when the engine has no tokenizer. */
    private final TextTokenizer tokenizer;
    private final int vocabSize;
    private final List<Integer> eosIds;
    private ConstraintCache cache;
    /** Why the tokenizer cannot serve constraints, once known. */
    private String unsupported;

    Constraints(TextTokenizer tokenizer, int vocabSize, List<Integer> eosIds) {
        this.tokenizer = tokenizer;
        this.vocabSize = vocabSize;
        this.eosIds = List.copyOf(eosIds);
    }

    /**
     * The automaton of {@code request}'s constraint, or null when it has none.
     *
     * @throws RequestValidationException naming the constraint's field: an invalid constraint, one combined with
     *     ignore_eos, or a model whose tokenizer cannot serve constraints
     */
    TokenAutomaton automaton(GenerationRequest request) {
        OutputConstraint c = request.constraint();
        if (c == null) {
            return null;
        }
        if (request.ignoreEos()) {
            throw new RequestValidationException(c.kind().field(), "cannot be combined with ignore_eos: the output "
                    + "ends where the constraint is satisfied");
        }
        return cache(c.kind().field()).get(c);
    }

    private ConstraintCache cache(String field) {
        if (cache == null && unsupported == null) {
            if (tokenizer == null) {
                unsupported = "this model has no tokenizer";
            } else {
                try {
                    cache = new ConstraintCache(new TokenVocabulary(tokenizer.tokenBytes(vocabSize), eosIds), CACHED);
                } catch (IllegalArgumentException e) {
                    unsupported = e.getMessage();
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot read the tokenizer's vocabulary", e);
                }
            }
        }
        if (cache == null) {
            throw new RequestValidationException(field, "structured output is not available: " + unsupported);
        }
        return cache;
    }
}
