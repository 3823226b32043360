package org.mstar.resources.constraint;

import java.util.ArrayList;
import java.util.List;

/**
 * A range of code points as a union of UTF-8 byte-range sequences: each sequence is one byte range per position
 * (e.g. {@code [E0][A0-BF][80-BF]}), and the strings they spell are exactly the UTF-8 forms of the range.
 */
final class Utf8Ranges {
    private static final int[] MAX_OF_LENGTH = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

    private Utf8Ranges() {}

    /** The sequences for {@code [first, last]} (empty when {@code first > last}); surrogates must not be inside. */
    static List<int[][]> of(int first, int last) {
        List<int[][]> out = new ArrayList<>();
        int lo = first;
        for (int len = 1; len <= 4 && lo <= last; len++) {
            int hi = Math.min(last, MAX_OF_LENGTH[len - 1]);
            if (lo <= hi) {
                split(lo, hi, len, out);
                lo = hi + 1;
            }
        }
        return out;
    }

    /**
     * Code points of one encoded length: if the range spans whole blocks of the trailing bytes it is one sequence;
     * otherwise cut it where a trailing byte would wrap, and recurse.
     */
    private static void split(int lo, int hi, int len, List<int[][]> out) {
        if (len == 1) {
            out.add(new int[][] {{lo, hi}});
            return;
        }
        for (int i = 1; i < len; i++) {
            int mask = (1 << (6 * i)) - 1;
            if ((lo & ~mask) != (hi & ~mask)) {
                if ((lo & mask) != 0) {
                    split(lo, lo | mask, len, out);
                    split((lo | mask) + 1, hi, len, out);
                    return;
                }
                if ((hi & mask) != mask) {
                    split(lo, (hi & ~mask) - 1, len, out);
                    split(hi & ~mask, hi, len, out);
                    return;
                }
            }
        }
        byte[] a = new String(Character.toChars(lo)).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        byte[] b = new String(Character.toChars(hi)).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        int[][] seq = new int[len][];
        for (int i = 0; i < len; i++) {
            seq[i] = new int[] {a[i] & 0xFF, b[i] & 0xFF};
        }
        out.add(seq);
    }
}
