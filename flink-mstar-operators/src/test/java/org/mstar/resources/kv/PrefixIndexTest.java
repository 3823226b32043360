package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class PrefixIndexTest {
    private PageArena arena;
    private PrefixIndex index;

    @BeforeEach
    void setUp() {
        arena = new PageArena(12);
        index = new PrefixIndex(arena);
    }

    private static byte[] key(int i) {
        return new byte[] {(byte) i};
    }

    @Test
    void insertSealsAndRetainsAndTheFirstWriterWins() {
        int[] pages = arena.acquire(2);
        assertThat(index.insert(key(1), pages[0], null)).isEqualTo(pages[0]);
        assertThat(arena.numOwners(pages[0])).isEqualTo(2);
        assertThat(arena.isSealed(pages[0])).isTrue();
        assertThat(index.insert(key(1), pages[1], null)).isEqualTo(pages[0]);
        assertThat(arena.numOwners(pages[1])).isEqualTo(1);
        assertThat(arena.isSealed(pages[1])).isFalse();
        assertThat(index.pageFor(key(1))).isEqualTo(pages[0]);
    }

    @Test
    void lookupReturnsTheLeadingRunUpToTheLimit() {
        int[] p = arena.acquire(3);
        index.insert(key(1), p[0], null);
        index.insert(key(2), p[1], key(1));
        index.insert(key(4), p[2], null);
        assertThat(index.lookup(List.of(key(1), key(2), key(3), key(4)), 10)).containsExactly(p[0], p[1]);
        assertThat(index.lookup(List.of(key(1), key(2)), 1)).containsExactly(p[0]);
        assertThat(index.lookup(List.of(key(3)), 10)).isEmpty();
    }

    @Test
    void evictsOldestLeavesTheIndexAloneOwnsAndThenTheirParents() {
        int[] p = arena.acquire(4);
        index.insert(key(1), p[0], null);
        index.insert(key(2), p[1], key(1));
        index.insert(key(3), p[2], null);
        index.insert(key(4), p[3], null);
        for (int page : p) {
            arena.release(page);
        }
        // key 4 is held by a request: its page has another owner.
        arena.retain(p[3]);
        // touch key 3 so it is newer than the chain 1 -> 2
        index.lookup(List.of(key(3)), 1);
        assertThat(index.evictable()).isEqualTo(3);

        assertThat(index.evict(1)).isEqualTo(1);
        assertThat(index.pageFor(key(2))).isNull();
        assertThat(index.pageFor(key(1))).isNotNull();
        assertThat(index.evict(5)).isEqualTo(2);
        assertThat(index.pageFor(key(1))).isNull();
        assertThat(index.pageFor(key(3))).isNull();
        assertThat(index.pageFor(key(4))).isEqualTo(p[3]);
        assertThat(index.evictable()).isZero();
        assertThat(arena.freeCount()).isEqualTo(11 - 1);
    }

    @Test
    void aParentOnlyTheIndexHoldsIsNotPinnedByALiveChild() {
        int[] p = arena.acquire(2);
        index.insert(key(1), p[0], null);
        arena.release(p[0]);
        // the child's stream still holds its page
        index.insert(key(2), p[1], key(1));
        assertThat(index.evictable()).isEqualTo(1);
        assertThat(index.evict(1)).isEqualTo(1);
        assertThat(index.pageFor(key(1))).isNull();
        assertThat(index.pageFor(key(2))).isEqualTo(p[1]);
    }

    @Test
    void aHeldChildPinsItsLinkedAncestors() {
        int[] p = arena.acquire(3);
        index.insert(key(1), p[0], null);
        index.insert(key(2), p[1], key(1));
        index.insert(key(3), p[2], key(2));
        arena.release(p[0]);
        arena.release(p[1]);
        assertThat(index.evictable()).isZero();
        assertThat(index.evict(3)).isZero();
        arena.release(p[2]);
        assertThat(index.evictable()).isEqualTo(3);
        assertThat(index.evict(3)).isEqualTo(3);
        assertThat(index.size()).isZero();
    }
}
