package org.mstar.resources.constraint;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Compiled constraints of one vocabulary, least recently used evicted first: a schema that comes back costs a map
 * lookup, and the masks its earlier requests computed come with it. Thread-safe.
 */
public final class ConstraintCache {
    private final TokenVocabulary vocab;
    private final Map<OutputConstraint, TokenAutomaton> compiled;

    /** @param capacity constraints kept */
    public ConstraintCache(TokenVocabulary vocab, int capacity) {
        this.vocab = vocab;
        this.compiled = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<OutputConstraint, TokenAutomaton> eldest) {
                return size() > capacity;
            }
        };
    }

    public TokenVocabulary vocabulary() {
        return vocab;
    }

    /**
     * The automaton of {@code constraint}, compiled on first use.
     *
     * @throws org.mstar.resources.RequestValidationException as {@link ConstraintCompiler#compile}
     */
    public TokenAutomaton get(OutputConstraint constraint) {
        synchronized (compiled) {
            TokenAutomaton a = compiled.get(constraint);
            if (a != null) {
                return a;
            }
        }
        TokenAutomaton a = ConstraintCompiler.compile(constraint, vocab);
        synchronized (compiled) {
            return compiled.merge(constraint, a, (old, fresh) -> old);
        }
    }
}
