package org.mstar.resources.sampler;

import java.util.Arrays;
import java.util.List;

/**
 * The allowed-token bitmask of one draw, {@code [rows, words]} ints with {@code words = ceil(vocab / 32)}: a
 * constrained row copies its state's mask, any other row allows everything. The masks were computed when the
 * previous token was accepted, so building this is a copy.
 */
final class TokenMasks {
    private TokenMasks() {}

    /**
     * @param cursors per row, the request's constraint position, or null for an unconstrained row
     * @return the row-major bitmask, or null when no row is constrained
     * @throws IllegalStateException when a constrained row allows no token at all (its vocabulary cannot spell any
     *     continuation) or its automaton was built for another vocabulary size
     */
    static int[] of(List<ConstraintCursor> cursors, List<String> rids, int vocab) {
        if (cursors.stream().allMatch(c -> c == null)) {
            return null;
        }
        int words = (vocab + 31) >>> 5;
        int[] bits = new int[cursors.size() * words];
        for (int r = 0; r < cursors.size(); r++) {
            ConstraintCursor c = cursors.get(r);
            if (c == null) {
                Arrays.fill(bits, r * words, (r + 1) * words, -1);
                continue;
            }
            if (c.words() != words) {
                throw new IllegalStateException("request '" + rids.get(r) + "' has a constraint built for "
                        + c.words() * 32 + " token ids, the logits have " + vocab);
            }
            int[] mask = c.mask();
            boolean any = false;
            for (int w : mask) {
                any |= w != 0;
            }
            if (!any) {
                throw new IllegalStateException("request '" + rids.get(r) + "': its constraint allows no token of this "
                        + "vocabulary here");
            }
            System.arraycopy(mask, 0, bits, r * words, words);
        }
        return bits;
    }
}
