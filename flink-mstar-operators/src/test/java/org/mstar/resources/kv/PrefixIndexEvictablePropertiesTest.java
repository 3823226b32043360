package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The prefix index keeps its evictable count from the arena's sharing changes; whatever writers, readers and
 * evictions do, it equals the count by definition (every entry walked).
 */
class PrefixIndexEvictablePropertiesTest {
    private static final int CHAINS = 4;

    @Property(tries = 300)
    void theKeptCountIsTheWalkedOne(@ForAll @Size(max = 120) List<@IntRange(min = 0, max = 999) Integer> ops) {
        PageArena arena = new PageArena(48);
        PrefixIndex index = new PrefixIndex(arena);
        int[] length = new int[CHAINS];
        List<Integer> held = new ArrayList<>();
        for (int op : ops) {
            int chain = op % CHAINS;
            switch ((op / CHAINS) % 4) {
                case 0 -> { // a writer seals the next page of a chain and indexes it, keeping its own reference
                    if (arena.freeCount() == 0) {
                        index.evict(1);
                    }
                    if (arena.freeCount() > 0) {
                        int page = arena.acquire(1)[0];
                        int i = length[chain];
                        if (index.insert(key(chain, i), page, i == 0 ? null : key(chain, i - 1)) == page) {
                            length[chain]++;
                        }
                        held.add(page);
                    }
                }
                case 1 -> { // someone lets go of a page
                    if (!held.isEmpty()) {
                        arena.release(held.remove(op % held.size()));
                    }
                }
                case 2 -> { // a reader attaches a chain's cached prefix
                    List<byte[]> keys = new ArrayList<>();
                    for (int i = 0; i < length[chain]; i++) {
                        keys.add(key(chain, i));
                    }
                    for (int page : index.lookup(keys, 1 + op % 8)) {
                        arena.retain(page);
                        held.add(page);
                    }
                }
                default -> index.evict(1 + op % 3);
            }
            assertThat(index.evictable()).isEqualTo(index.evictableByWalk());
        }
    }

    private static byte[] key(int chain, int position) {
        return new byte[] {(byte) chain, (byte) position};
    }
}
