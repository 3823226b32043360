package org.mstar.resources.lora;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * Which adapter each device slot holds, and who uses it: the host side of the adapter pool, as a page table is for
 * KV pages. A slot is free (holds nothing), or holds one adapter with a pin count, the requests running with it. An
 * adapter already held is shared; otherwise a free slot takes it, else the held adapter unpinned longest ago is
 * evicted for it; a pinned slot is never taken. Not thread-safe: one step loop drives it.
 */
final class AdapterSlots {
    /** What {@link #acquire} granted: the slot, pinned once more, and whether the adapter must be loaded into it. */
    record Grant(int slot, boolean load, String evicted) {}

    private final String[] held;
    private final int[] pins;
    /** When each slot was last pinned or unpinned: the least recent unpinned one is evicted first. */
    private final long[] lastUsed;
    private final Map<String, Integer> slotOf = new HashMap<>();
    private long clock;
    private long loads;
    private long evictions;

    AdapterSlots(int slots) {
        if (slots < 1) {
            throw new IllegalArgumentException("an adapter pool needs at least one slot, got " + slots);
        }
        held = new String[slots];
        pins = new int[slots];
        lastUsed = new long[slots];
    }

    /**
     * Pins a slot holding {@code adapter}: the one already holding it, else a free one, else the least recently used
     * unpinned one (evicting what it held); the caller loads the adapter where the grant says so.
     *
     * @return the grant, or null when every slot is pinned by another adapter
     */
    Grant acquire(String adapter) {
        Integer resident = slotOf.get(adapter);
        if (resident != null) {
            pin(resident);
            return new Grant(resident, false, null);
        }
        int slot = firstFree();
        String evicted = null;
        if (slot < 0) {
            slot = leastRecentlyUsedUnpinned();
            if (slot < 0) {
                return null;
            }
            evicted = held[slot];
            slotOf.remove(evicted);
            evictions++;
        }
        held[slot] = adapter;
        slotOf.put(adapter, slot);
        loads++;
        pin(slot);
        return new Grant(slot, true, evicted);
    }

    private int firstFree() {
        for (int s = 0; s < held.length; s++) {
            if (held[s] == null) {
                return s;
            }
        }
        return -1;
    }

    private int leastRecentlyUsedUnpinned() {
        int lru = -1;
        for (int s = 0; s < held.length; s++) {
            if (pins[s] == 0 && (lru < 0 || lastUsed[s] < lastUsed[lru])) {
                lru = s;
            }
        }
        return lru;
    }

    /** One user of {@code slot} less; at none, its adapter stays loaded and may be evicted. */
    void release(int slot) {
        if (pins[slot] == 0) {
            throw new IllegalStateException("adapter slot " + slot + " (" + held[slot] + ") released more than pinned");
        }
        pins[slot]--;
        lastUsed[slot] = ++clock;
    }

    /** Gives up a slot whose load failed: released once and holding nothing, so nothing is taken for loaded. */
    void discard(int slot) {
        release(slot);
        if (pins[slot] == 0) {
            slotOf.remove(held[slot]);
            held[slot] = null;
        }
    }

    private void pin(int slot) {
        pins[slot]++;
        lastUsed[slot] = ++clock;
    }

    int size() {
        return held.length;
    }

    /** The adapter {@code slot} holds, or null when it is free. */
    String adapterIn(int slot) {
        return held[slot];
    }

    /** Requests running with the adapter in {@code slot}. */
    int pins(int slot) {
        return pins[slot];
    }

    /** The slot holding {@code adapter}, or -1. */
    int slotOf(String adapter) {
        return slotOf.getOrDefault(adapter, -1);
    }

    /** Slots holding nothing. */
    int free() {
        return (int) Arrays.stream(held).filter(a -> a == null).count();
    }

    /** Adapters loaded into a slot so far. */
    long loads() {
        return loads;
    }

    /** Adapters evicted from a slot for another so far. */
    long evictions() {
        return evictions;
    }
}
