package org.mstar.resources.constraint;

import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * A constraint over a vocabulary's tokens: its states are those of the {@link ByteDfa}, a token is allowed in a
 * state when its bytes lead from there to a live state, and the end ids are allowed exactly in accepting states.
 * So every prefix the sampler can produce still extends to a matching output, and the output ends only where it
 * matches.
 *
 * <p>Each state's mask (one bit per token id, {@link #words()} ints) is computed the first time the state is
 * asked for, by walking the vocabulary in byte order through the byte automaton (tokens sharing a prefix share
 * the walk), and kept: a schema used again reuses every mask it computed. {@link #prefetch} computes a state's mask
 * on another thread, so it is ready when the next step samples. Safe for concurrent use: two threads may compute
 * one mask at the same time, with the same result.
 */
public final class TokenAutomaton {
    private final ByteDfa dfa;
    private final TokenVocabulary vocab;
    private final int words;
    private final AtomicReferenceArray<StateMask> masks;

    /** One state's allowed tokens, whether any of them is text (not an end id), and whether any is allowed at all. */
    private record StateMask(int[] bits, boolean anyText, boolean any) {}

    TokenAutomaton(ByteDfa dfa, TokenVocabulary vocab) {
        this.dfa = dfa;
        this.vocab = vocab;
        this.words = (vocab.size() + 31) >>> 5;
        this.masks = new AtomicReferenceArray<>(dfa.states());
    }

    public int start() {
        return dfa.start();
    }

    /** States of the byte automaton. */
    public int states() {
        return dfa.states();
    }

    /** Ints per mask: {@code ceil(vocabulary / 32)}. */
    public int words() {
        return words;
    }

    public int vocabularySize() {
        return vocab.size();
    }

    /** Whether the output may end in {@code state}. */
    public boolean accepting(int state) {
        return dfa.accepting(state);
    }

    /**
     * The state after {@code token} from {@code state}; an end id leaves the state as it is.
     *
     * @throws IllegalArgumentException when {@code token} is not allowed in {@code state}
     */
    public int next(int state, int token) {
        if (isEos(token)) {
            if (!dfa.accepting(state)) {
                throw new IllegalArgumentException("end token " + token + " where the output cannot end yet");
            }
            return state;
        }
        byte[] b = token >= 0 && token < vocab.size() ? vocab.bytes(token) : null;
        int s = b == null ? -1 : dfa.walk(state, b);
        if (s < 0) {
            throw new IllegalArgumentException("token " + token + " is not allowed in constraint state " + state);
        }
        return s;
    }

    /**
     * The tokens allowed in {@code state}: bit {@code id & 31} of int {@code id >>> 5}. The array is shared: do not
     * change it.
     */
    public int[] mask(int state) {
        return stateMask(state).bits();
    }

    /**
     * Whether the output can go on from {@code state}; when not, it is complete there and the request ends. Known
     * from the byte automaton alone, without the state's mask.
     */
    public boolean continues(int state) {
        return dfa.moves(state);
    }

    /** Whether some text token is allowed in {@code state} (computes its mask). */
    public boolean allowsText(int state) {
        return stateMask(state).anyText();
    }

    /** Whether any token, text or end id, is allowed in {@code state} (computes its mask). */
    public boolean allowsAny(int state) {
        return stateMask(state).any();
    }

    /** Computes {@code state}'s mask on {@code executor} unless it is known already. */
    public void prefetch(int state, Executor executor) {
        if (masks.get(state) == null) {
            executor.execute(() -> stateMask(state));
        }
    }

    private StateMask stateMask(int state) {
        StateMask m = masks.get(state);
        if (m == null) {
            m = compute(state);
            masks.compareAndSet(state, null, m);
        }
        return m;
    }

    private StateMask compute(int state) {
        int[] bits = new int[words];
        int[] sorted = vocab.sorted();
        int[] lcp = vocab.lcp();
        // path[d]: the state after the first d bytes of the current token (-1: dead); valid up to `filled`
        int[] path = new int[64];
        path[0] = state;
        int filled = 0;
        boolean anyText = false;
        for (int i = 0; i < sorted.length; i++) {
            int id = sorted[i];
            byte[] b = vocab.bytes(id);
            int d = Math.min(lcp[i], filled);
            int s = path[d];
            while (s >= 0 && d < b.length) {
                s = dfa.next(s, b[d] & 0xFF);
                d++;
                if (d >= path.length) {
                    path = java.util.Arrays.copyOf(path, path.length * 2);
                }
                path[d] = s;
            }
            filled = d;
            if (s >= 0) {
                bits[id >>> 5] |= 1 << (id & 31);
                anyText = true;
            }
        }
        if (dfa.accepting(state)) {
            for (int id : vocab.eosIds()) {
                bits[id >>> 5] |= 1 << (id & 31);
            }
        }
        return new StateMask(bits, anyText, anyText || dfa.accepting(state) && vocab.eosIds().length > 0);
    }

    private boolean isEos(int token) {
        for (int id : vocab.eosIds()) {
            if (id == token) {
                return true;
            }
        }
        return false;
    }
}
