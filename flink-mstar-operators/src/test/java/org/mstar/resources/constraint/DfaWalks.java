package org.mstar.resources.constraint;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/** Random strings of a {@link ByteDfa}'s language: a walk that wanders, then heads for the nearest accepting state. */
final class DfaWalks {
    private final ByteDfa dfa;
    /** Bytes from each state to the nearest accepting state. */
    private final int[] toAccept;

    DfaWalks(ByteDfa dfa) {
        this.dfa = dfa;
        this.toAccept = new int[dfa.states()];
        Arrays.fill(toAccept, Integer.MAX_VALUE);
        boolean changed = true;
        for (int s = 0; s < dfa.states(); s++) {
            if (dfa.accepting(s)) {
                toAccept[s] = 0;
            }
        }
        while (changed) {
            changed = false;
            for (int s = 0; s < dfa.states(); s++) {
                for (int b = 0; b < 256; b++) {
                    int d = dfa.next(s, b);
                    if (d >= 0 && toAccept[d] != Integer.MAX_VALUE && toAccept[d] + 1 < toAccept[s]) {
                        toAccept[s] = toAccept[d] + 1;
                        changed = true;
                    }
                }
            }
        }
    }

    /** UTF-8 bytes of one accepted string, at most about {@code wander} bytes before heading for the end. */
    byte[] walk(Random rnd, int wander) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int s = dfa.start();
        int steps = 0;
        while (true) {
            if (dfa.accepting(s) && (!dfa.moves(s) || steps >= wander || rnd.nextInt(4) == 0)) {
                return out.toByteArray();
            }
            List<int[]> options = new ArrayList<>();
            for (int b = 0; b < 256; b++) {
                int d = dfa.next(s, b);
                if (d >= 0 && (steps < wander || toAccept[d] < toAccept[s])) {
                    options.add(new int[] {b, d});
                }
            }
            int[] pick = options.get(rnd.nextInt(options.size()));
            out.write(pick[0]);
            s = pick[1];
            steps++;
        }
    }

    boolean accepts(byte[] bytes) {
        int s = dfa.walk(dfa.start(), bytes);
        return s >= 0 && dfa.accepting(s);
    }
}
