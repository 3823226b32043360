package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class PageArenaTest {

    @Test
    void sinkPageIsTakenAtConstructionAndNeverHandedOut() {
        PageArena a = new PageArena(4);
        assertThat(a.numOwners(PageArena.SINK_PAGE)).isEqualTo(1);
        assertThat(a.freeList()).containsExactly(1, 2, 3);
        assertThat(a.acquire(3)).containsExactly(1, 2, 3);
        assertThat(a.freeCount()).isZero();
        assertThatThrownBy(() -> a.release(PageArena.SINK_PAGE)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> a.retain(PageArena.SINK_PAGE)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void acquireIsAllOrNothingAndFifo() {
        PageArena a = new PageArena(6);
        assertThat(a.acquire(6)).isNull();
        assertThat(a.freeCount()).isEqualTo(5);
        int[] two = a.acquire(2);
        assertThat(two).containsExactly(1, 2);
        a.release(1);
        assertThat(a.freeList()).containsExactly(3, 4, 5, 1);
        assertThat(a.acquire(4)).containsExactly(3, 4, 5, 1);
    }

    @Test
    void pageIsFreedOnlyAtZeroOwnersAndLosesItsSeal() {
        PageArena a = new PageArena(3);
        int p = a.acquire(1)[0];
        a.seal(p);
        a.retain(p);
        a.release(p);
        assertThat(a.numOwners(p)).isEqualTo(1);
        assertThat(a.isSealed(p)).isTrue();
        assertThat(a.freeList()).doesNotContain(p);
        a.release(p);
        assertThat(a.isSealed(p)).isFalse();
        assertThat(a.freeList()).endsWith(p);
        assertThatThrownBy(() -> a.release(p)).hasMessageContaining("free page");
        assertThatThrownBy(() -> a.retain(p)).hasMessageContaining("free page");
    }

    @Test
    void sharingIsToldAtOneToTwoOwnersAndBack() {
        PageArena a = new PageArena(5);
        List<String> told = new java.util.ArrayList<>();
        a.onSharing((page, shared) -> told.add(page + (shared ? "+" : "-")));
        int p = a.acquire(1)[0];
        a.retain(p);
        a.retain(p);
        a.release(p);
        a.release(p);
        a.release(p);
        assertThat(told).containsExactly(p + "+", p + "-");
    }

    @Test
    void trailMoves() {
        PageArena a = new PageArena(5);
        a.acquire(2);
        assertThat(a.trail()[0]).isEqualTo(2);
        PageArena b = new PageArena(5);
        b.acquire(2);
        assertThat(b.trail()).containsExactly(a.trail());
        a.release(1);
        b.releaseAll(List.of(2));
        assertThat(a.acquire(3)).containsExactly(3, 4, 1);
        assertThat(b.acquire(3)).containsExactly(3, 4, 2);
        assertThat(b.trail()[0]).isEqualTo(a.trail()[0]);
        assertThat(b.trail()[1]).isNotEqualTo(a.trail()[1]);
    }
}
