package org.mstar.resources.kv;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The device pages of one KV pool: a FIFO free list plus, per page, an owner count and a seal.
 *
 * <p>A page is free exactly when it has no owner. Owners are streams, prefix-cache leases and index
 * entries; a page goes back to the free list only when its last owner lets go, and its seal is cleared
 * then. A sealed page is never written again, which is what makes sharing it safe: only sealed pages
 * may have more than one owner.
 *
 * <p>Page 0 is acquired at construction and never released: it is {@link #SINK_PAGE}, where padding
 * rows write and from which nothing real is read.
 *
 * <p>Not thread-safe; the KV manager's lock guards it.
 */
final class PageArena {
    /** Where writes of sink and padding rows go; owned by the arena itself for its whole life. */
    static final int SINK_PAGE = 0;

    private final ArrayDeque<Integer> free;
    private final int[] owners;
    private final boolean[] sealed;
    private SharingListener sharing;

    /** Told when a page's owners go from one to two, or from two back to one. */
    @FunctionalInterface
    interface SharingListener {
        void shared(int page, boolean byMoreThanOne);
    }

    /** The one listener of sharing changes (the prefix index, which keeps its evictable count by them). */
    void onSharing(SharingListener listener) {
        this.sharing = listener;
    }
    /** For TP followers: how many pages were handed out, and a hash of their order. */
    private long allocations;
    private long trailHash;

    PageArena(int numPages) {
        if (numPages < 2) {
            throw new IllegalArgumentException("a pool needs at least 2 pages (page 0 is the sink), got " + numPages);
        }
        free = new ArrayDeque<>(numPages);
        for (int p = 0; p < numPages; p++) {
            free.addLast(p);
        }
        owners = new int[numPages];
        sealed = new boolean[numPages];
        int[] sink = acquire(1);
        if (sink[0] != SINK_PAGE) {
            throw new IllegalStateException("the first page acquired must be the sink page");
        }
        allocations = 0;
        trailHash = 0;
    }

    int capacity() {
        return owners.length;
    }

    int freeCount() {
        return free.size();
    }

    /** {@code n} free pages, each with one owner, or null (and nothing taken) if fewer are free. */
    int[] acquire(int n) {
        if (n < 0) {
            throw new IllegalArgumentException("cannot acquire " + n + " pages");
        }
        if (n > free.size()) {
            return null;
        }
        int[] pages = new int[n];
        for (int i = 0; i < n; i++) {
            int p = free.pollFirst();
            owners[p] = 1;
            pages[i] = p;
            trailHash = trailHash * 31 + p;
        }
        allocations += n;
        return pages;
    }

    /** One more owner for a page that already has one (sharing a sealed page, leasing it). */
    void retain(int page) {
        if (owners[page] <= 0) {
            throw new IllegalStateException("retain of free page " + page);
        }
        if (page == SINK_PAGE) {
            throw new IllegalStateException("the sink page is never shared out");
        }
        if (++owners[page] == 2 && sharing != null) {
            sharing.shared(page, true);
        }
    }

    /** One owner fewer; the page returns to the free list, unsealed, when none is left. */
    void release(int page) {
        if (page == SINK_PAGE) {
            throw new IllegalStateException("the sink page is never released");
        }
        if (owners[page] <= 0) {
            throw new IllegalStateException("release of free page " + page);
        }
        if (--owners[page] == 0) {
            sealed[page] = false;
            free.addLast(page);
        } else if (owners[page] == 1 && sharing != null) {
            sharing.shared(page, false);
        }
    }

    void releaseAll(List<Integer> pages) {
        for (int p : pages) {
            release(p);
        }
    }

    /** Mark a page as never to be written again, so it may be shared. */
    void seal(int page) {
        if (owners[page] <= 0) {
            throw new IllegalStateException("seal of free page " + page);
        }
        sealed[page] = true;
    }

    int numOwners(int page) {
        return owners[page];
    }

    boolean isSealed(int page) {
        return sealed[page];
    }

    /** The free list in hand-out order (a copy). */
    List<Integer> freeList() {
        return new ArrayList<>(free);
    }

    /** (pages handed out so far, hash of their order): identical on ranks that made identical decisions. */
    long[] trail() {
        return new long[] {allocations, trailHash};
    }
}
