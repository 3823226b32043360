package org.mstar.resources.sampler;

import java.util.concurrent.Executor;
import org.mstar.resources.constraint.TokenAutomaton;

/**
 * Where one request stands in its constraint's {@link TokenAutomaton}: a pure function of the tokens it accepted,
 * so a restored request that replays its tokens stands where it stood.
 */
final class ConstraintCursor {
    private final TokenAutomaton automaton;
    private int state;

    ConstraintCursor(TokenAutomaton automaton) {
        this.automaton = automaton;
        this.state = automaton.start();
    }

    /** Moves past {@code token} and has the new state's mask computed on {@code executor} for the next draw. */
    void accept(int token, Executor executor) {
        state = automaton.next(state, token);
        automaton.prefetch(state, executor);
    }

    void reset() {
        state = automaton.start();
    }

    TokenAutomaton automaton() {
        return automaton;
    }

    int state() {
        return state;
    }

    /** Whether the output is complete: nothing may follow. */
    boolean complete() {
        return !automaton.continues(state);
    }
}
