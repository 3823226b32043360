package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.PagedKVConfig;

/**
 * What the parts of the KV manager share: the pool, its arena, the requests, and the prefix cache once
 * one is open. The manager's lock guards all of it.
 */
final class KVState {
    final PagedKVConfig config;
    final int pageSize;
    final PageArena arena;
    final KvPool pool;
    final Map<String, RequestState> requests = new LinkedHashMap<>();
    /** Null until {@code enablePrefixCache} opens one. */
    PrefixCache prefix;
    /** Pages lent to same-device hand-offs ({@link KvShelf}) by ticket, oldest first; each lend owns its pages once. */
    final Map<Long, Lend> lent = new LinkedHashMap<>();

    /** One hand-off's lent pages per stream label; claimed once a receiver holds the ticket. */
    static final class Lend {
        final KvShelf shelf;
        final Map<String, int[]> pages;
        boolean claimed;

        Lend(KvShelf shelf, Map<String, int[]> pages) {
            this.shelf = shelf;
            this.pages = pages;
        }
    }

    KVState(PagedKVConfig config, KvPool pool) {
        this.config = config;
        this.pageSize = config.pageSize();
        this.arena = new PageArena(config.maxNumPages());
        this.pool = pool;
    }

    int pagesFor(long tokens) {
        return (int) ((tokens + pageSize - 1) / pageSize);
    }

    RequestState request(String rid) {
        return requests.get(rid);
    }

    /** The request, which must have been ingested. */
    RequestState requireRequest(String rid) {
        RequestState r = requests.get(rid);
        if (r == null) {
            throw new IllegalStateException("request '" + rid + "' was never ingested into this KV cache");
        }
        return r;
    }

    CacheStream stream(String rid, String label) {
        RequestState r = requests.get(rid);
        return r == null ? null : r.streams.get(label);
    }

    /** The stream, created empty (keyed if the request keys this label) when missing. */
    CacheStream openStream(String rid, String label) {
        RequestState r = requireRequest(rid);
        return r.streams.computeIfAbsent(label, l -> newStream(r, l));
    }

    CacheStream newStream(RequestState r, String label) {
        CacheStream s = new CacheStream(r.requestId, label);
        s.chain = prefix == null ? null : prefix.chainFor(r.cfg, label);
        return s;
    }

    /** Pages evicting from the prefix index could add to the free list now. */
    int evictable() {
        return prefix == null ? 0 : prefix.index().evictable();
    }

    /**
     * Whether {@code need} pages can be acquired, asking the prefix index to evict the difference
     * first. The index evicts only when that closes the gap, so a request that cannot be served does
     * not cost the cache anything.
     */
    boolean makeRoom(int need) {
        int free = arena.freeCount();
        if (need <= free) {
            return true;
        }
        if (need - free > evictable()) {
            takeBackLends(need);
            free = arena.freeCount();
            if (need <= free) {
                return true;
            }
            if (need - free > evictable()) {
                return false;
            }
        }
        prefix.index().evict(need - free);
        return true;
    }

    /**
     * Take back unclaimed lends, oldest first, until {@code need} pages are free or evictable: their receivers
     * recompute instead ({@link LentPagesGone}). A claimed lend is being copied from and stays.
     */
    private void takeBackLends(int need) {
        for (var it = lent.entrySet().iterator(); it.hasNext() && need > arena.freeCount() + evictable(); ) {
            var e = it.next();
            if (!e.getValue().claimed) {
                it.remove();
                e.getValue().shelf.forget(e.getKey());
                releaseLend(e.getValue());
            }
        }
    }

    void releaseLend(Lend lend) {
        for (int[] pages : lend.pages.values()) {
            for (int p : pages) {
                arena.release(p);
            }
        }
    }

    /** Pages still missing for {@code need} after everything evictable was evicted. */
    int shortfall(int need) {
        return Math.max(0, need - arena.freeCount() - evictable());
    }

    /** Top the stream's page list up to cover {@code tokens}; the caller made room. Returns pages added. */
    int topUp(CacheStream s, long tokens) {
        int need = pagesFor(tokens) - s.pages.size();
        if (need <= 0) {
            return 0;
        }
        int[] got = arena.acquire(need);
        if (got == null) {
            throw new IllegalStateException("top-up of " + need + " pages without room");
        }
        for (int p : got) {
            s.pages.add(p);
        }
        s.generation++;
        return need;
    }

    /**
     * Make a stream's lease its leading pages: the stream now holds the cached prefix as committed
     * tokens. Pages it held before (empty, left by a step that did not count) stay after the lease as
     * spare capacity, so an undo can hand them back unchanged.
     */
    void adoptLease(CacheStream s) {
        List<Integer> spare = new ArrayList<>(s.pages);
        s.pages.clear();
        s.pages.addAll(s.lease);
        s.pages.addAll(spare);
        s.storedLen = s.lease.size() * pageSize;
        if (s.chain != null) {
            s.chain.setCursor(s.lease.size());
        }
        s.lease = null;
        s.generation++;
    }

    /** Give up every page and lease the stream holds. */
    void dropPages(CacheStream s) {
        arena.releaseAll(s.pages);
        s.pages.clear();
        dropLease(s);
        s.generation++;
    }

    void dropLease(CacheStream s) {
        if (s.lease != null) {
            arena.releaseAll(s.lease);
            s.lease = null;
        }
    }
}
