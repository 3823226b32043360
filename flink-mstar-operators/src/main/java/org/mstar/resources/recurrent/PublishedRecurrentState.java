package org.mstar.resources.recurrent;

import java.util.Arrays;
import java.util.stream.IntStream;
import org.mstar.resources.PublishedInfo;

/**
 * A request's recurrent state as another node takes it on: the state after {@code tokens} tokens, as host bytes in
 * the pool's layout (every layer's SSM state then convolution window, in declared order). A copy rather than a slot
 * reference, because the state is updated in place by the next step while the publication waits to be sent.
 */
public final class PublishedRecurrentState implements PublishedInfo {
    private int tokens;
    private byte[] state;

    public PublishedRecurrentState(int tokens, byte[] state) {
        if (tokens < 0) {
            throw new IllegalArgumentException("a state after " + tokens + " tokens");
        }
        this.tokens = tokens;
        this.state = state.clone();
    }

    /** The tokens the state has absorbed. */
    public int tokens() {
        return tokens;
    }

    /** A copy of the state's bytes. */
    public byte[] state() {
        return state.clone();
    }

    /** The state's bytes themselves, for this package's readers, which never change them. */
    byte[] bytes() {
        return state;
    }

    /** The state after more tokens replaces this one; an older one changes nothing. */
    @Override
    public void update(PublishedInfo other) {
        if (!(other instanceof PublishedRecurrentState o)) {
            throw new IllegalArgumentException("cannot merge " + other.getClass().getSimpleName()
                    + " into a published recurrent state");
        }
        if (o.tokens >= tokens) {
            tokens = o.tokens;
            state = o.state.clone();
        }
    }

    @Override
    public PublishedRecurrentState copy() {
        return new PublishedRecurrentState(tokens, state);
    }

    @Override
    public IntStream storedLengths() {
        return IntStream.of(tokens);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PublishedRecurrentState p && p.tokens == tokens && Arrays.equals(p.state, state);
    }

    @Override
    public int hashCode() {
        return 31 * tokens + Arrays.hashCode(state);
    }

    @Override
    public String toString() {
        return "PublishedRecurrentState{" + tokens + " tokens, " + state.length + " bytes}";
    }
}
