package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Rooted page key → sealed page, shared across requests.
 *
 * <ul>
 *   <li><b>First writer wins.</b> Inserting a key that exists changes nothing; the caller's copy stays
 *       private.</li>
 *   <li><b>The index is an owner.</b> Insert seals the page and retains it, so the page outlives the
 *       stream that wrote it.</li>
 *   <li><b>Parents.</b> Entries form a tree by parent pointer (the previous page's entry). A parent
 *       that only the index holds is not linked, so a live child cannot pin it.</li>
 *   <li><b>Eviction.</b> Only leaves are evicted, oldest logical-clock stamp first, and only those the
 *       index alone owns; the clock ticks on every insert and every matching lookup. Removing a leaf
 *       may make its parent a leaf. Since only leaves go, parent pointers never dangle.</li>
 * </ul>
 *
 * <p>Not thread-safe; the KV manager's lock guards it.
 */
final class PrefixIndex {
    private final PageArena arena;
    private final Map<Key, Entry> byKey = new HashMap<>();
    private final Map<Integer, Entry> byPage = new HashMap<>();
    /** Entries with no indexed child, oldest stamp first; an entry is here iff its children count is 0. */
    private final TreeSet<Entry> leaves = new TreeSet<>(
            Comparator.comparingLong((Entry e) -> e.stamp).thenComparingLong(e -> e.id));
    private long clock;
    private long nextId;
    /** Entries that {@link #evict} may not take: held by someone else, or an ancestor of one that is. */
    private int pinned;

    PrefixIndex(PageArena arena) {
        this.arena = arena;
        arena.onSharing(this::sharingChanged);
    }

    private record Key(byte[] bytes) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && Arrays.equals(bytes, k.bytes);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(bytes);
        }
    }

    private static final class Entry {
        final Key key;
        final int page;
        final Entry parent;
        final long id;
        int children;
        long stamp;
        /** Entries in this one's subtree (itself included) whose page someone besides the index holds. */
        int heldBelow;

        Entry(Key key, int page, Entry parent, long id) {
            this.key = key;
            this.page = page;
            this.parent = parent;
            this.id = id;
        }
    }

    int size() {
        return byKey.size();
    }

    /** Every page the index holds a reference to. */
    Set<Integer> pages() {
        return byPage.keySet();
    }

    boolean holdsPage(int page) {
        return byPage.containsKey(page);
    }

    /** The page stored under {@code rootedKey}, or null; does not stamp. */
    Integer pageFor(byte[] rootedKey) {
        Entry e = byKey.get(new Key(rootedKey));
        return e == null ? null : e.page;
    }

    /**
     * Index {@code page} under {@code rootedKey} unless the key is already there (first writer wins).
     *
     * @param parentKey the previous page's rooted key, or null for a first page
     * @return the page the index holds for the key: {@code page} if it was inserted, else the earlier one
     */
    int insert(byte[] rootedKey, int page, byte[] parentKey) {
        Key k = new Key(rootedKey);
        Entry existing = byKey.get(k);
        if (existing != null) {
            return existing.page;
        }
        if (byPage.containsKey(page)) {
            throw new IllegalStateException("page " + page + " is already indexed under another key");
        }
        Entry parent = parentKey == null ? null : byKey.get(new Key(parentKey));
        if (parent != null && arena.numOwners(parent.page) <= 1) {
            parent = null;
        }
        arena.retain(page);
        arena.seal(page);
        Entry e = new Entry(k, page, parent, nextId++);
        e.stamp = ++clock;
        if (parent != null && parent.children++ == 0) {
            leaves.remove(parent);
        }
        leaves.add(e);
        byKey.put(k, e);
        byPage.put(page, e);
        if (arena.numOwners(page) > 1) {
            held(e, 1);
        }
        return page;
    }

    /**
     * Pages of the longest leading run of {@code rootedKeys} the index holds, at most {@code maxPages};
     * a non-empty match stamps every matched entry with one new clock value.
     */
    List<Integer> lookup(List<byte[]> rootedKeys, int maxPages) {
        List<Entry> run = new ArrayList<>();
        for (int i = 0; i < Math.min(maxPages, rootedKeys.size()); i++) {
            Entry e = byKey.get(new Key(rootedKeys.get(i)));
            if (e == null) {
                break;
            }
            run.add(e);
        }
        if (run.isEmpty()) {
            return List.of();
        }
        long stamp = ++clock;
        List<Integer> pages = new ArrayList<>(run.size());
        for (Entry e : run) {
            boolean leaf = e.children == 0;
            if (leaf) {
                leaves.remove(e);
            }
            e.stamp = stamp;
            if (leaf) {
                leaves.add(e);
            }
            pages.add(e.page);
        }
        return pages;
    }

    /**
     * Drop up to {@code n} pages: the oldest leaves the index alone owns, skipping those someone else
     * holds. Called only where an allocation came up short.
     *
     * @return pages returned to the free list
     */
    int evict(int n) {
        int freed = 0;
        while (freed < n) {
            Entry victim = null;
            for (Entry e : leaves) {
                if (arena.numOwners(e.page) == 1) {
                    victim = e;
                    break;
                }
            }
            if (victim == null) {
                break;
            }
            remove(victim);
            freed++;
        }
        return freed;
    }

    /** Only entries the index alone owns are removed, so nothing they pin changes. */
    private void remove(Entry e) {
        leaves.remove(e);
        byKey.remove(e.key);
        byPage.remove(e.page);
        arena.release(e.page);
        if (e.parent != null && --e.parent.children == 0) {
            leaves.add(e.parent);
        }
    }

    /**
     * Pages {@link #evict} could free now: those the index alone owns with no descendant someone else holds.
     * Kept by the arena's sharing changes, so asking is free: a step asks on every page it allocates once the
     * free list has run dry, and walking the whole index there cost milliseconds a step at tens of thousands of
     * pages.
     */
    int evictable() {
        return byKey.size() - pinned;
    }

    /** {@link #evictable()} by its definition, walking every entry: the reference the kept count is tested against. */
    int evictableByWalk() {
        Set<Entry> pins = new HashSet<>();
        for (Entry e : byKey.values()) {
            if (arena.numOwners(e.page) > 1) {
                for (Entry a = e; a != null && pins.add(a); a = a.parent) {
                    // every ancestor of a held entry stays
                }
            }
        }
        return byKey.size() - pins.size();
    }

    private void sharingChanged(int page, boolean byMoreThanOne) {
        Entry e = byPage.get(page);
        if (e != null) {
            held(e, byMoreThanOne ? 1 : -1);
        }
    }

    /** Counts {@code e}'s page as held ({@code +1}) or no longer held ({@code -1}) up its ancestry. */
    private void held(Entry e, int delta) {
        for (Entry a = e; a != null; a = a.parent) {
            int before = a.heldBelow;
            a.heldBelow += delta;
            if (before == 0) {
                pinned++;
            } else if (a.heldBelow == 0) {
                pinned--;
            }
        }
    }
}
