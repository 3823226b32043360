package org.mstar.resources.constraint;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.State;
import dk.brics.automaton.Transition;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * A deterministic automaton over UTF-8 bytes with only live states (an accepting state is reachable from every
 * state), as a dense table: {@link #next} is -1 where a byte leads nowhere useful. Built from an automaton over
 * UTF-16 code units by spelling each code point range in UTF-8, so a token that ends inside a multi-byte character
 * simply leaves the automaton in a state in the middle of that character, and the next token goes on from there.
 */
public final class ByteDfa {
    private final int[] next;
    private final boolean[] accept;
    private final int start;
    /** Per state, whether some byte leads on (otherwise the output can only end there). */
    private final boolean[] moves;

    private ByteDfa(int[] next, boolean[] accept, int start) {
        this.next = next;
        this.accept = accept;
        this.start = start;
        this.moves = new boolean[accept.length];
        for (int i = 0; i < next.length; i++) {
            moves[i >>> 8] |= next[i] >= 0;
        }
    }

    /** The start state. */
    public int start() {
        return start;
    }

    public int states() {
        return accept.length;
    }

    /** The state after {@code b} (0-255) from {@code state}, or -1 when no accepted string continues so. */
    public int next(int state, int b) {
        return next[(state << 8) | b];
    }

    public boolean accepting(int state) {
        return accept[state];
    }

    /** Whether any byte leads on from {@code state}. */
    public boolean moves(int state) {
        return moves[state];
    }

    /** The state after {@code bytes[from, to)} from {@code state}, or -1. */
    public int walk(int state, byte[] bytes) {
        int s = state;
        for (int i = 0; i < bytes.length && s >= 0; i++) {
            s = next[(s << 8) | (bytes[i] & 0xFF)];
        }
        return s;
    }

    /**
     * The UTF-8 form of {@code chars} (minimised here). Lone surrogates in it are dropped: they have no UTF-8 form.
     *
     * @param maxStates refuse larger automata
     * @throws IllegalArgumentException when the byte automaton has more than {@code maxStates} states
     */
    static ByteDfa fromUtf16(Automaton chars, int maxStates) {
        Automaton bytes = utf8(chars);
        bytes.minimize();
        List<State> order = new ArrayList<>();
        Map<State, Integer> ids = new HashMap<>();
        ArrayDeque<State> queue = new ArrayDeque<>();
        State initial = bytes.getInitialState();
        ids.put(initial, 0);
        order.add(initial);
        queue.add(initial);
        while (!queue.isEmpty()) {
            for (Transition t : queue.poll().getSortedTransitions(false)) {
                if (!ids.containsKey(t.getDest())) {
                    ids.put(t.getDest(), order.size());
                    order.add(t.getDest());
                    queue.add(t.getDest());
                }
            }
        }
        int n = order.size();
        if (n > maxStates) {
            throw new IllegalArgumentException("the constraint needs " + n + " automaton states; at most " + maxStates
                    + " are allowed (bound lengths and counts more tightly)");
        }
        int[] table = new int[n << 8];
        Arrays.fill(table, -1);
        boolean[] accept = new boolean[n];
        for (int s = 0; s < n; s++) {
            State st = order.get(s);
            accept[s] = st.isAccept();
            for (Transition t : st.getTransitions()) {
                int dest = ids.get(t.getDest());
                for (int b = t.getMin(); b <= t.getMax(); b++) {
                    table[(s << 8) | b] = dest;
                }
            }
        }
        pruneDead(table, accept);
        return new ByteDfa(table, accept, 0);
    }

    /** Removes transitions into states from which no accepting state can be reached. */
    private static void pruneDead(int[] table, boolean[] accept) {
        int n = accept.length;
        boolean[] live = accept.clone();
        boolean changed = true;
        while (changed) {
            changed = false;
            for (int s = 0; s < n; s++) {
                if (live[s]) {
                    continue;
                }
                for (int b = 0; b < 256; b++) {
                    int d = table[(s << 8) | b];
                    if (d >= 0 && live[d]) {
                        live[s] = true;
                        changed = true;
                        break;
                    }
                }
            }
        }
        for (int i = 0; i < table.length; i++) {
            if (table[i] >= 0 && !live[table[i]]) {
                table[i] = -1;
            }
        }
    }

    /** A (nondeterministic) byte automaton, chars as byte values 0-255, accepting the UTF-8 of {@code chars}. */
    private static Automaton utf8(Automaton chars) {
        Map<State, State> copy = new IdentityHashMap<>();
        for (State s : chars.getStates()) {
            State b = new State();
            b.setAccept(s.isAccept());
            copy.put(s, b);
        }
        for (State s : chars.getStates()) {
            State from = copy.get(s);
            for (Transition t : s.getTransitions()) {
                State to = copy.get(t.getDest());
                addCodePoints(from, t.getMin(), Math.min(t.getMax(), 0xD7FF), to);
                addCodePoints(from, Math.max(t.getMin(), 0xE000), t.getMax(), to);
                int hiFirst = Math.max(t.getMin(), 0xD800);
                int hiLast = Math.min(t.getMax(), 0xDBFF);
                if (hiFirst <= hiLast) {
                    addPairs(from, hiFirst, hiLast, t.getDest(), copy);
                }
            }
        }
        Automaton a = new Automaton();
        a.setInitialState(copy.get(chars.getInitialState()));
        a.setDeterministic(false);
        a.restoreInvariant();
        a.determinize();
        return a;
    }

    /** High surrogates {@code [hiFirst, hiLast]} from {@code from}, then the low ones {@code mid} takes. */
    private static void addPairs(State from, int hiFirst, int hiLast, State mid, Map<State, State> copy) {
        for (Transition low : mid.getTransitions()) {
            int loFirst = Math.max(low.getMin(), 0xDC00);
            int loLast = Math.min(low.getMax(), 0xDFFF);
            if (loFirst > loLast) {
                continue;
            }
            State to = copy.get(low.getDest());
            if (loFirst == 0xDC00 && loLast == 0xDFFF) {
                addCodePoints(from, Character.toCodePoint((char) hiFirst, (char) loFirst),
                        Character.toCodePoint((char) hiLast, (char) loLast), to);
            } else {
                for (int hi = hiFirst; hi <= hiLast; hi++) {
                    addCodePoints(from, Character.toCodePoint((char) hi, (char) loFirst),
                            Character.toCodePoint((char) hi, (char) loLast), to);
                }
            }
        }
    }

    /** Paths from {@code from} to {@code to} spelling every code point of {@code [first, last]} in UTF-8. */
    private static void addCodePoints(State from, int first, int last, State to) {
        for (int[][] seq : Utf8Ranges.of(first, last)) {
            State s = from;
            for (int i = 0; i < seq.length; i++) {
                State d = i == seq.length - 1 ? to : new State();
                s.addTransition(new Transition((char) seq[i][0], (char) seq[i][1], d));
                s = d;
            }
        }
    }
}
