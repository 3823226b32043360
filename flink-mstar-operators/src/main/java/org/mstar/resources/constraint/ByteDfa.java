package org.mstar.resources.constraint;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.State;
import dk.brics.automaton.Transition;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A deterministic automaton over UTF-8 bytes with only live states (an accepting state is reachable from every
 * state), minimal, as a dense table: {@link #next} is -1 where a byte leads nowhere useful. Built from an automaton
 * over UTF-16 code units by spelling each code point range in UTF-8, so a token that ends inside a multi-byte
 * character simply leaves the automaton in a state in the middle of that character, and the next token goes on
 * from there.
 *
 * <p>The byte-level subset construction and minimisation run here on int tables: brics, which builds the character
 * automata, works on object graphs over a char alphabet and took seconds for a few thousand byte states.
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

    /** The table itself, {@code [states * 256]}, for tight loops: read only. */
    int[] table() {
        return next;
    }

    /** The state after {@code bytes} from {@code state}, or -1. */
    public int walk(int state, byte[] bytes) {
        int s = state;
        for (int i = 0; i < bytes.length && s >= 0; i++) {
            s = next[(s << 8) | (bytes[i] & 0xFF)];
        }
        return s;
    }

    /**
     * The UTF-8 form of {@code chars}, minimal. Lone surrogates in it are dropped: they have no UTF-8 form.
     *
     * @param maxStates refuse larger automata
     * @throws IllegalArgumentException when the byte automaton needs more than {@code maxStates} states
     */
    static ByteDfa fromUtf16(Automaton chars, int maxStates) {
        chars.determinize(); // over chars first: far fewer subsets to build at the byte level
        ByteNfa nfa = ByteNfa.of(chars);
        Dense d = determinize(nfa, maxStates);
        prune(d);
        ByteDfa dfa = minimal(d);
        if (dfa.states() > maxStates) {
            throw tooLarge(dfa.states(), maxStates);
        }
        return dfa;
    }

    /** A dense DFA under construction: {@code next[s * 256 + b]}, -1 for none. */
    private record Dense(int[] next, boolean[] accept, int start) {}

    /**
     * Subset construction from the NFA's start state. Each subset's bytes are cut into segments at its transitions'
     * range ends, and each segment's target subset is computed once.
     */
    private static Dense determinize(ByteNfa nfa, int maxStates) {
        Map<IntSet, Integer> ids = new HashMap<>();
        List<int[]> subsets = new ArrayList<>();
        int[] first = {nfa.start};
        ids.put(new IntSet(first), 0);
        subsets.add(first);
        int[] table = new int[256 * 64];
        List<Boolean> accept = new ArrayList<>();
        boolean[] cut = new boolean[257];
        for (int s = 0; s < subsets.size(); s++) {
            int[] subset = subsets.get(s);
            boolean acc = false;
            List<int[]> moves = new ArrayList<>();
            Arrays.fill(cut, false);
            cut[0] = true;
            cut[256] = true;
            for (int q : subset) {
                acc |= nfa.accept[q];
                for (int[] t : nfa.transitions.get(q)) {
                    moves.add(t);
                    cut[t[0]] = true;
                    cut[t[1] + 1] = true;
                }
            }
            accept.add(acc);
            if ((s + 1) * 256 > table.length) {
                table = Arrays.copyOf(table, table.length * 2);
            }
            // segment k covers bytes [starts[k], starts[k + 1]); each move adds its target to the segments it spans
            int[] segOf = new int[256];
            int segments = 0;
            int[] starts = new int[257];
            for (int b = 0; b < 256; b++) {
                if (cut[b]) {
                    starts[segments++] = b;
                }
                segOf[b] = segments - 1;
            }
            starts[segments] = 256;
            List<List<Integer>> targets = new ArrayList<>(segments);
            for (int k = 0; k < segments; k++) {
                targets.add(new ArrayList<>(2));
            }
            for (int[] t : moves) {
                for (int k = segOf[t[0]]; k <= segOf[t[1]]; k++) {
                    targets.get(k).add(t[2]);
                }
            }
            for (int k = 0; k < segments; k++) {
                int id = -1;
                if (!targets.get(k).isEmpty()) {
                    int[] target = targets.get(k).stream().mapToInt(Integer::intValue).sorted().distinct().toArray();
                    IntSet key = new IntSet(target);
                    Integer known = ids.get(key);
                    if (known == null) {
                        known = subsets.size();
                        if (known >= 4 * maxStates) {
                            throw tooLarge(known, maxStates);
                        }
                        ids.put(key, known);
                        subsets.add(target);
                    }
                    id = known;
                }
                Arrays.fill(table, s * 256 + starts[k], s * 256 + starts[k + 1], id);
            }
        }
        boolean[] acc = new boolean[accept.size()];
        for (int i = 0; i < acc.length; i++) {
            acc[i] = accept.get(i);
        }
        return new Dense(Arrays.copyOf(table, acc.length * 256), acc, 0);
    }

    /** Removes transitions into states from which no accepting state can be reached (a backward search). */
    private static void prune(Dense d) {
        int[] table = d.next();
        int n = d.accept().length;
        int[] inStart = new int[n + 1];
        for (int target : table) {
            if (target >= 0) {
                inStart[target + 1]++;
            }
        }
        for (int s = 0; s < n; s++) {
            inStart[s + 1] += inStart[s];
        }
        int[] fill = Arrays.copyOf(inStart, n);
        int[] from = new int[inStart[n]];
        for (int i = 0; i < table.length; i++) {
            if (table[i] >= 0) {
                from[fill[table[i]]++] = i >>> 8;
            }
        }
        boolean[] live = d.accept().clone();
        ArrayDeque<Integer> queue = new ArrayDeque<>();
        for (int s = 0; s < n; s++) {
            if (live[s]) {
                queue.add(s);
            }
        }
        while (!queue.isEmpty()) {
            int t = queue.poll();
            for (int k = inStart[t]; k < inStart[t + 1]; k++) {
                if (!live[from[k]]) {
                    live[from[k]] = true;
                    queue.add(from[k]);
                }
            }
        }
        for (int i = 0; i < table.length; i++) {
            if (table[i] >= 0 && !live[table[i]]) {
                table[i] = -1;
            }
        }
    }

    /**
     * Moore's partition refinement (states with the same acceptance and the same classes of successors on every
     * byte are merged, until nothing splits), then the classes reachable from the start, numbered in breadth-first
     * order from it.
     */
    private static ByteDfa minimal(Dense d) {
        int n = d.accept().length;
        int[] table = d.next();
        int[] cls = new int[n];
        for (int s = 0; s < n; s++) {
            cls[s] = d.accept()[s] ? 1 : 0;
        }
        int classes = 2;
        while (true) {
            Map<IntSet, Integer> signatures = new HashMap<>();
            int[] refined = new int[n];
            for (int s = 0; s < n; s++) {
                refined[s] = signatures.computeIfAbsent(new IntSet(signature(table, cls, s)), k -> signatures.size());
            }
            boolean stable = signatures.size() == classes;
            cls = refined;
            classes = signatures.size();
            if (stable) {
                break;
            }
        }
        // renumber the classes reachable from the start, breadth first
        int[] id = new int[classes];
        Arrays.fill(id, -1);
        int[] rep = new int[classes];
        for (int s = n - 1; s >= 0; s--) {
            rep[cls[s]] = s;
        }
        List<Integer> order = new ArrayList<>();
        id[cls[d.start()]] = 0;
        order.add(cls[d.start()]);
        for (int i = 0; i < order.size(); i++) {
            int s = rep[order.get(i)];
            for (int b = 0; b < 256; b++) {
                int t = table[s * 256 + b];
                if (t >= 0 && id[cls[t]] < 0) {
                    id[cls[t]] = order.size();
                    order.add(cls[t]);
                }
            }
        }
        int m = order.size();
        int[] out = new int[m * 256];
        boolean[] acc = new boolean[m];
        for (int i = 0; i < m; i++) {
            int s = rep[order.get(i)];
            acc[i] = d.accept()[s];
            for (int b = 0; b < 256; b++) {
                int t = table[s * 256 + b];
                out[i * 256 + b] = t < 0 ? -1 : id[cls[t]];
            }
        }
        return new ByteDfa(out, acc, 0);
    }

    /** {@code s}'s class, then its successors' classes as runs: (first byte, class) wherever the class changes. */
    private static int[] signature(int[] table, int[] cls, int s) {
        int[] sig = new int[2 * 256 + 1];
        int n = 0;
        sig[n++] = cls[s];
        int prev = Integer.MIN_VALUE;
        for (int b = 0; b < 256; b++) {
            int t = table[s * 256 + b];
            int c = t < 0 ? -1 : cls[t];
            if (c != prev) {
                sig[n++] = b;
                sig[n++] = c;
                prev = c;
            }
        }
        return Arrays.copyOf(sig, n);
    }

    static IllegalArgumentException tooLarge(int states, int maxStates) {
        return new IllegalArgumentException("the constraint needs " + states + " or more automaton states; at most "
                + maxStates + " are allowed (bound lengths and counts more tightly)");
    }

    /** An int array as a hash key. */
    private record IntSet(int[] values) {
        @Override
        public boolean equals(Object o) {
            return o instanceof IntSet other && Arrays.equals(values, other.values);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(values);
        }
    }

    /**
     * The byte-level NFA of a character automaton: its states, then intermediate states inside multi-byte
     * characters, shared by every sequence that ends with the same byte ranges into the same state.
     */
    private static final class ByteNfa {
        final List<List<int[]>> transitions = new ArrayList<>();
        boolean[] accept;
        int start;
        private final Map<String, Integer> suffixStates = new HashMap<>();

        static ByteNfa of(Automaton chars) {
            ByteNfa nfa = new ByteNfa();
            Map<State, Integer> ids = new HashMap<>();
            List<State> states = new ArrayList<>(chars.getStates());
            for (State s : states) {
                ids.put(s, nfa.newState());
            }
            nfa.start = ids.get(chars.getInitialState());
            for (State s : states) {
                int from = ids.get(s);
                for (Transition t : s.getTransitions()) {
                    int to = ids.get(t.getDest());
                    nfa.addCodePoints(from, t.getMin(), Math.min(t.getMax(), 0xD7FF), to);
                    nfa.addCodePoints(from, Math.max(t.getMin(), 0xE000), t.getMax(), to);
                    int hiFirst = Math.max(t.getMin(), 0xD800);
                    int hiLast = Math.min(t.getMax(), 0xDBFF);
                    if (hiFirst <= hiLast) {
                        nfa.addPairs(from, hiFirst, hiLast, t.getDest(), ids);
                    }
                }
            }
            nfa.accept = new boolean[nfa.transitions.size()];
            for (State s : states) {
                nfa.accept[ids.get(s)] = s.isAccept();
            }
            return nfa;
        }

        private int newState() {
            transitions.add(new ArrayList<>());
            return transitions.size() - 1;
        }

        /** High surrogates {@code [hiFirst, hiLast]} from {@code from}, then the low ones {@code mid} takes. */
        private void addPairs(int from, int hiFirst, int hiLast, State mid, Map<State, Integer> ids) {
            for (Transition low : mid.getTransitions()) {
                int loFirst = Math.max(low.getMin(), 0xDC00);
                int loLast = Math.min(low.getMax(), 0xDFFF);
                if (loFirst > loLast) {
                    continue;
                }
                int to = ids.get(low.getDest());
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
        private void addCodePoints(int from, int first, int last, int to) {
            for (int[][] seq : Utf8Ranges.of(first, last)) {
                transitions.get(from).add(new int[] {seq[0][0], seq[0][1], suffixState(seq, 1, to)});
            }
        }

        /** The state that reads {@code seq[i..]} into {@code to} (shared), or {@code to} itself when nothing is left. */
        private int suffixState(int[][] seq, int i, int to) {
            if (i == seq.length) {
                return to;
            }
            StringBuilder key = new StringBuilder().append(to);
            for (int k = i; k < seq.length; k++) {
                key.append(':').append(seq[k][0]).append('-').append(seq[k][1]);
            }
            Integer s = suffixStates.get(key.toString());
            if (s == null) {
                int after = suffixState(seq, i + 1, to);
                s = newState();
                transitions.get(s).add(new int[] {seq[i][0], seq[i][1], after});
                suffixStates.put(key.toString(), s);
            }
            return s;
        }
    }
}
