package org.mstar.resources.lora;

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

/**
 * The adapter pool's bookkeeping under any sequence of requests starting (pinning their adapter), finishing (releasing
 * it) and loads failing: slots are conserved (each holds nothing or one adapter, each adapter is in one slot at most),
 * pin counts are the running requests', a pinned adapter is never evicted or moved, a refusal happens only when every
 * slot is pinned, and loads are bounded: every load filled a free slot or evicted one adapter, and adapters that all
 * fit are each loaded once.
 */
class AdapterSlotsPropertiesTest {

    /** Start a request with adapter {@code adapter}, finish the {@code request}-th running one, or fail a load. */
    record Action(int kind, int adapter, int request) {}

    @Provide
    Arbitrary<List<Action>> actions() {
        Arbitrary<Action> action = Combinators.combine(Arbitraries.integers().between(0, 9),
                Arbitraries.integers().between(0, 7), Arbitraries.integers().between(0, 50))
                .as((kind, adapter, request) -> new Action(kind < 5 ? 0 : kind < 9 ? 1 : 2, adapter, request));
        return action.list().ofMinSize(1).ofMaxSize(80);
    }

    @Property(tries = 300)
    void slotsAreConservedPinnedAdaptersStayAndLoadsAreBounded(@ForAll("actions") List<Action> actions,
                                                             @ForAll("slotCounts") int size,
                                                             @ForAll("adapterCounts") int adapters) {
        AdapterSlots slots = new AdapterSlots(size);
        List<Integer> running = new ArrayList<>(); // the slot each running request pinned
        Map<String, Integer> users = new HashMap<>();
        Set<String> asked = new HashSet<>();
        int discards = 0;
        for (Action a : actions) {
            Map<String, Integer> pinnedBefore = residentPinned(slots, size);
            if (a.kind() == 1) {
                if (!running.isEmpty()) {
                    int slot = running.remove(a.request() % running.size());
                    users.merge(slots.adapterIn(slot), -1, Integer::sum);
                    slots.release(slot);
                }
            } else {
                String adapter = "a" + a.adapter() % adapters;
                boolean resident = slots.slotOf(adapter) >= 0;
                AdapterSlots.Grant grant = slots.acquire(adapter);
                if (grant == null) {
                    assertThat(resident).as("refused though resident").isFalse();
                    assertThat(pinnedBefore).as("refused with an unpinned slot").hasSize(size);
                } else {
                    assertThat(grant.load()).as("loads exactly what was not resident").isEqualTo(!resident);
                    if (grant.evicted() != null) {
                        assertThat(pinnedBefore).as("evicted a pinned adapter").doesNotContainKey(grant.evicted());
                        assertThat(slots.free()).as("evicted with a free slot").isZero();
                    }
                    if (a.kind() == 2 && grant.load()) {
                        slots.discard(grant.slot()); // its load failed: nothing holds a pin
                        discards++;
                    } else {
                        asked.add(adapter);
                        running.add(grant.slot());
                        users.merge(adapter, 1, Integer::sum);
                    }
                }
            }
            pinnedBefore.forEach((adapter, slot) -> {
                if (users.getOrDefault(adapter, 0) > 0) {
                    assertThat(slots.slotOf(adapter)).as(adapter + " pinned, then moved").isEqualTo(slot);
                }
            });
            assertConserved(slots, size, users);
        }
        assertThat(slots.loads()).as("every load filled a free slot, evicted one, or failed")
                .isEqualTo(slots.evictions() + size - slots.free() + discards);
        if (adapters <= size) {
            assertThat(slots.evictions()).as("adapters that fit are never evicted").isZero();
            assertThat(slots.loads() - discards).as("adapters that fit are loaded once").isEqualTo(asked.size());
        }
    }

    @Provide
    Arbitrary<Integer> slotCounts() {
        return Arbitraries.integers().between(1, 5);
    }

    @Provide
    Arbitrary<Integer> adapterCounts() {
        return Arbitraries.integers().between(1, 8);
    }

    /** Adapter → slot of every resident adapter some request pins. */
    private static Map<String, Integer> residentPinned(AdapterSlots slots, int size) {
        Map<String, Integer> pinned = new HashMap<>();
        for (int s = 0; s < size; s++) {
            if (slots.pins(s) > 0) {
                pinned.put(slots.adapterIn(s), s);
            }
        }
        return pinned;
    }

    private static void assertConserved(AdapterSlots slots, int size, Map<String, Integer> users) {
        Set<String> held = new HashSet<>();
        int free = 0;
        for (int s = 0; s < size; s++) {
            String adapter = slots.adapterIn(s);
            if (adapter == null) {
                free++;
                assertThat(slots.pins(s)).as("a free slot pinned").isZero();
                continue;
            }
            assertThat(held.add(adapter)).as(adapter + " in two slots").isTrue();
            assertThat(slots.slotOf(adapter)).isEqualTo(s);
            assertThat(slots.pins(s)).as(adapter + "'s pins").isEqualTo(users.getOrDefault(adapter, 0));
        }
        assertThat(slots.free()).isEqualTo(free);
        users.forEach((adapter, n) -> {
            if (n > 0) {
                assertThat(slots.slotOf(adapter)).as(adapter + " in use but not resident").isGreaterThanOrEqualTo(0);
            }
        });
    }
}
