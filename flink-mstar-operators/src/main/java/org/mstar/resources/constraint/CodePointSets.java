package org.mstar.resources.constraint;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.BasicAutomata;
import java.util.ArrayList;
import java.util.List;

/**
 * Sets of Unicode code points as automata over UTF-16 code units (brics works on Java chars): a code point of the
 * Basic Multilingual Plane is one unit, a supplementary one a surrogate pair. Lone surrogates are never in a set,
 * since they have no UTF-8 form.
 */
final class CodePointSets {
    private static final char HIGH_FIRST = '\uD800';
    private static final char LOW_LAST = '\uDFFF';

    private CodePointSets() {}

    /** Every code point: the BMP outside the surrogates, and every surrogate pair. */
    static Automaton any() {
        return except(List.of());
    }

    /**
     * Every code point except the BMP ranges {@code excluded} (pairs {@code {first, last}}, inclusive, in any
     * order, possibly overlapping).
     */
    static Automaton except(List<char[]> excluded) {
        boolean[] out = new boolean[0x10000];
        for (char[] r : excluded) {
            for (int c = r[0]; c <= r[1]; c++) {
                out[c] = true;
            }
        }
        for (int c = HIGH_FIRST; c <= LOW_LAST; c++) {
            out[c] = true;
        }
        List<Automaton> parts = new ArrayList<>();
        int c = 0;
        while (c < 0x10000) {
            if (out[c]) {
                c++;
                continue;
            }
            int start = c;
            while (c < 0x10000 && !out[c]) {
                c++;
            }
            parts.add(BasicAutomata.makeCharRange((char) start, (char) (c - 1)));
        }
        parts.add(supplementary());
        return Automaton.union(parts);
    }

    /** The BMP ranges {@code ranges} ({@code {first, last}} pairs, surrogates dropped). */
    static Automaton of(List<char[]> ranges) {
        List<Automaton> parts = new ArrayList<>();
        for (char[] r : ranges) {
            char first = r[0];
            char last = r[1];
            if (first < HIGH_FIRST) {
                parts.add(BasicAutomata.makeCharRange(first, (char) Math.min(last, HIGH_FIRST - 1)));
            }
            if (last > LOW_LAST) {
                parts.add(BasicAutomata.makeCharRange((char) Math.max(first, LOW_LAST + 1), last));
            }
        }
        return parts.isEmpty() ? BasicAutomata.makeEmpty() : Automaton.union(parts);
    }

    /** Every code point from U+10000 on, as a surrogate pair. */
    static Automaton supplementary() {
        return BasicAutomata.makeCharRange(HIGH_FIRST, '\uDBFF').concatenate(BasicAutomata.makeCharRange('\uDC00', LOW_LAST));
    }
}
