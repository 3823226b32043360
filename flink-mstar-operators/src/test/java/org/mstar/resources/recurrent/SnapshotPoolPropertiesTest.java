package org.mstar.resources.recurrent;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * The prefix cache's snapshot slots under any sequence of snapshots taken (claimed and filled), requests attaching
 * one (pinned) and starting from it (unpinned): slots are conserved (free + kept = capacity, no slot under two keys,
 * every slot in range), a pinned snapshot is never evicted and its slot still holds what its key names, an evicted
 * key is never found again until it is taken anew, and eviction takes the least recently used unpinned snapshot.
 */
class SnapshotPoolPropertiesTest {
    private static final int FIRST = 5;

    record Action(int kind, int key) {}

    @Provide
    Arbitrary<List<Action>> actions() {
        return Combinators.combine(Arbitraries.integers().between(0, 2), Arbitraries.integers().between(0, 11))
                .as(Action::new).list().ofMinSize(1).ofMaxSize(80);
    }

    private static byte[] key(int k) {
        return new byte[] {(byte) k, (byte) (k * 7), 42};
    }

    @Property(tries = 300)
    void slotsAreConservedPinsProtectAndEvictedKeysAreGone(@ForAll("actions") List<Action> actions,
                                                           @ForAll @IntRange(min = 1, max = 4) int capacity) {
        SnapshotPool pool = new SnapshotPool(FIRST, capacity);
        // the model: what each slot holds (the key its state was taken under), keys by use, pins by slot
        Map<Integer, Integer> content = new HashMap<>();
        Map<Integer, Integer> slotOfKey = new HashMap<>();
        List<Integer> recency = new ArrayList<>();
        List<Integer> pins = new ArrayList<>(); // a slot per attached request
        for (Action a : actions) {
            switch (a.kind()) {
                case 0 -> {
                    boolean kept = slotOfKey.containsKey(a.key());
                    Integer lru = recency.stream().filter(k -> !pins.contains(slotOfKey.get(k))).findFirst()
                            .orElse(null);
                    int slot = pool.claim(key(a.key()));
                    if (kept) {
                        assertThat(slot).as("a kept key is not taken again").isEqualTo(-1);
                        touch(recency, a.key());
                    } else if (slot < 0) {
                        assertThat(slotOfKey).as("refused only when full and all pinned").hasSize(capacity);
                        assertThat(lru).isNull();
                    } else {
                        assertThat(slot).isBetween(FIRST, FIRST + capacity - 1);
                        assertThat(pins).as("a pinned snapshot is never evicted").doesNotContain(slot);
                        Integer evicted = content.get(slot);
                        if (evicted != null) {
                            assertThat(evicted).as("the least recently used unpinned one goes").isEqualTo(lru);
                            slotOfKey.remove(evicted);
                            recency.remove(evicted);
                        } else {
                            assertThat(slotOfKey.size()).isLessThan(capacity);
                        }
                        content.put(slot, a.key());
                        slotOfKey.put(a.key(), slot);
                        recency.add(a.key());
                    }
                }
                case 1 -> {
                    int slot = pool.pin(key(a.key()));
                    if (!slotOfKey.containsKey(a.key())) {
                        assertThat(slot).as("an evicted or never taken key is not found").isEqualTo(-1);
                    } else {
                        assertThat(content.get(slot)).as("the slot holds the key's state").isEqualTo(a.key());
                        pins.add(slot);
                        touch(recency, a.key());
                    }
                }
                default -> {
                    if (!pins.isEmpty()) {
                        int slot = pins.remove(a.key() % pins.size());
                        pool.unpin(slot);
                    }
                }
            }
            assertThat(pool.free() + pool.kept()).isEqualTo(capacity);
            assertThat(pool.kept()).isEqualTo(slotOfKey.size());
            assertThat(new HashSet<>(slotOfKey.values())).hasSize(slotOfKey.size());
            for (Map.Entry<Integer, Integer> e : slotOfKey.entrySet()) {
                assertThat(pool.holds(key(e.getKey()))).isTrue();
                assertThat(pool.pins(e.getValue())).isEqualTo(count(pins, e.getValue()));
            }
            for (int slot : Set.copyOf(pins)) {
                assertThat(slotOfKey).as("a pinned snapshot is still kept").containsValue(slot);
            }
        }
    }

    private static void touch(List<Integer> recency, int k) {
        recency.remove((Integer) k);
        recency.add(k);
    }

    private static int count(List<Integer> pins, int slot) {
        return (int) pins.stream().filter(p -> p == slot).count();
    }
}
