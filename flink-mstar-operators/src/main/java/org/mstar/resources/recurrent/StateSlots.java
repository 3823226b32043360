package org.mstar.resources.recurrent;

import java.util.BitSet;

/**
 * Which device slots hold a request's state: the host side of the state pool. Slot 0 is the scratch of capture
 * padding rows and is never handed out; the others are free or held by one request. {@link #acquire} takes the lowest
 * free slot, so releasing what was just acquired leaves the pool exactly as it was (a rolled-back admit leaves no
 * trace). Not thread-safe: one step loop drives it.
 */
final class StateSlots {
    /** The slot padding rows address; no request ever holds it. */
    static final int SCRATCH = 0;

    private final int capacity;
    private final BitSet held = new BitSet();

    /** @param capacity slots in all, the scratch included */
    StateSlots(int capacity) {
        if (capacity < 2) {
            throw new IllegalArgumentException("a state pool needs the scratch slot and one more, got " + capacity);
        }
        this.capacity = capacity;
    }

    /** The lowest free slot, now held; -1 when every slot is held. */
    int acquire() {
        int slot = held.nextClearBit(SCRATCH + 1);
        if (slot >= capacity) {
            return -1;
        }
        held.set(slot);
        return slot;
    }

    void release(int slot) {
        if (slot == SCRATCH || !held.get(slot)) {
            throw new IllegalStateException("state slot " + slot + " released but not held");
        }
        held.clear(slot);
    }

    boolean isHeld(int slot) {
        return held.get(slot);
    }

    /** Slots in all, the scratch included. */
    int capacity() {
        return capacity;
    }

    int used() {
        return held.cardinality();
    }

    int free() {
        return capacity - 1 - used();
    }
}
