package org.mstar.resources.constraint;

import java.util.Arrays;
import java.util.List;

/**
 * The allowed-token bitmask of one draw, {@code [rows, words]} ints with {@code words = ceil(vocab / 32)}: a
 * constrained row copies its state's mask, any other row allows everything. The masks were computed when the
 * previous token was accepted (or earlier, by another request), so building this is a copy per row.
 */
public final class AllowedTokens {
    private AllowedTokens() {}

    /**
     * @param automata per row, the request's automaton, or null for an unconstrained row
     * @param states   per row, its state in that automaton (ignored for unconstrained rows)
     * @param names    per row, a name for errors (the request id)
     * @return the row-major bitmask, or null when no row is constrained
     * @throws IllegalStateException when a constrained row allows no token at all (its vocabulary cannot spell any
     *     continuation) or its automaton was built for another vocabulary size
     */
    public static int[] bitmask(List<TokenAutomaton> automata, int[] states, List<String> names, int vocab) {
        if (automata.stream().allMatch(a -> a == null)) {
            return null;
        }
        int words = (vocab + 31) >>> 5;
        int[] bits = new int[automata.size() * words];
        for (int r = 0; r < automata.size(); r++) {
            TokenAutomaton a = automata.get(r);
            if (a == null) {
                Arrays.fill(bits, r * words, (r + 1) * words, -1);
                continue;
            }
            if (a.words() != words) {
                throw new IllegalStateException("request '" + names.get(r) + "' has a constraint built for "
                        + a.vocabularySize() + " token ids, the logits have " + vocab);
            }
            if (!a.allowsAny(states[r])) {
                throw new IllegalStateException("request '" + names.get(r) + "': its constraint allows no token of "
                        + "this vocabulary here");
            }
            System.arraycopy(a.mask(states[r]), 0, bits, r * words, words);
        }
        return bits;
    }
}
