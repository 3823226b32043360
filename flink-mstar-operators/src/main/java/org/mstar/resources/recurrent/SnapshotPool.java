package org.mstar.resources.recurrent;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Which device slots hold a state snapshot of the prefix cache, and under which key: the host side of the snapshot
 * slots of the state pool ({@code first .. first + capacity - 1}). A snapshot is a request's whole recurrent state
 * after a keyed prefix (every Mamba2 layer's SSM state and convolution window), keyed as the KV prefix cache keys the
 * page that ends there.
 *
 * <ul>
 *   <li>Conservation: every snapshot slot is either free or holds exactly one key.</li>
 *   <li>A pinned snapshot (a request will start from it) is never evicted, so its slot keeps the state its key
 *       names until the last pin goes.</li>
 *   <li>{@link #claim} takes a free slot, else evicts the least recently used unpinned snapshot; once evicted, a
 *       key is not found again until it is claimed and filled anew.</li>
 * </ul>
 * Not thread-safe: one step loop drives it.
 */
final class SnapshotPool {
    private final int capacity;
    private final Deque<Integer> free = new ArrayDeque<>();
    /** Key → snapshot, least recently used first. */
    private final LinkedHashMap<ByteBuffer, Entry> byKey = new LinkedHashMap<>(16, 0.75f, true);
    /** Slot → its snapshot, read without counting as a use. */
    private final Map<Integer, Entry> bySlot = new HashMap<>();

    private static final class Entry {
        final int slot;
        int pins;

        Entry(int slot) {
            this.slot = slot;
        }
    }

    /**
     * @param first    the first snapshot slot of the state pool
     * @param capacity snapshot slots, at least 1
     */
    SnapshotPool(int first, int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("a snapshot pool needs at least one slot, got " + capacity);
        }
        this.capacity = capacity;
        for (int s = first; s < first + capacity; s++) {
            free.add(s);
        }
    }

    /** Whether a snapshot is kept under {@code key}; does not count as a use. */
    boolean holds(byte[] key) {
        return byKey.containsKey(ByteBuffer.wrap(key));
    }

    /** Pins the snapshot under {@code key} (now most recently used) and answers its slot; -1 when none is kept. */
    int pin(byte[] key) {
        Entry e = byKey.get(ByteBuffer.wrap(key));
        if (e == null) {
            return -1;
        }
        e.pins++;
        return e.slot;
    }

    /** Gives back one pin of the snapshot in {@code slot}. */
    void unpin(int slot) {
        Entry e = bySlot.get(slot);
        if (e == null || e.pins == 0) {
            throw new IllegalStateException("snapshot slot " + slot + " unpinned but not pinned");
        }
        e.pins--;
    }

    /**
     * A slot to fill with the snapshot under {@code key}, now kept under it: a free one, else the least recently
     * used unpinned snapshot's, evicted. -1 when {@code key} is kept already (now most recently used) or every
     * snapshot is pinned.
     */
    int claim(byte[] key) {
        ByteBuffer k = ByteBuffer.wrap(key.clone());
        if (byKey.get(k) != null) {
            return -1;
        }
        Integer slot = free.poll();
        if (slot == null) {
            slot = evictOne();
            if (slot == null) {
                return -1;
            }
        }
        Entry e = new Entry(slot);
        byKey.put(k, e);
        bySlot.put(slot, e);
        return slot;
    }

    private Integer evictOne() {
        for (Iterator<Map.Entry<ByteBuffer, Entry>> it = byKey.entrySet().iterator(); it.hasNext(); ) {
            Entry e = it.next().getValue();
            if (e.pins == 0) {
                it.remove();
                bySlot.remove(e.slot);
                return e.slot;
            }
        }
        return null;
    }

    /** Snapshot slots in all. */
    int capacity() {
        return capacity;
    }

    /** Snapshots kept. */
    int kept() {
        return byKey.size();
    }

    /** Slots holding no snapshot. */
    int free() {
        return free.size();
    }

    /** Pins on the snapshot in {@code slot}; 0 when it holds none. */
    int pins(int slot) {
        Entry e = bySlot.get(slot);
        return e == null ? 0 : e.pins;
    }
}
