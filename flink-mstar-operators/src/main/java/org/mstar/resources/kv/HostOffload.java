package org.mstar.resources.kv;

/**
 * Moving a request's KV to host memory and back (eviction under page pressure).
 *
 * <p>Offload claims every non-empty stream of the request or none: nothing moves while any of its
 * streams has a step in flight or a read pending, since an admitted plan or a transfer addresses those
 * pages. A stream that does not fit in the host pool stays on the device. Copies are synchronous
 * ({@code copyToHost} waits for the device), so the claim, the copy and the release of device pages
 * happen under the manager's lock in one go.
 */
final class HostOffload {
    private final KVState st;
    private final HostPagePool host;

    HostOffload(KVState st, HostPagePool host) {
        this.st = st;
        this.host = host;
    }

    HostPagePool pool() {
        return host;
    }

    /**
     * Move the request's non-empty streams to host memory.
     *
     * @return device pages the request let go of (0 if nothing moved); those the prefix index also
     *     holds became evictable rather than free
     */
    int offload(RequestState r) {
        if (r.anyInFlight() || r.anyOffloaded() || r.streams.values().stream().anyMatch(CacheStream::readPending)) {
            return 0;
        }
        int released = 0;
        for (CacheStream s : r.streams.values()) {
            if (s.storedLen == 0) {
                continue;
            }
            int[] hostPages = host.store(s.pageIds(0, st.pagesFor(s.storedLen)));
            if (hostPages == null) {
                continue;
            }
            s.hostPages = hostPages;
            s.offloaded = true;
            released += s.pages.size();
            // Pages lent by the index come back at reload as the request's own copies.
            st.dropPages(s);
        }
        return released;
    }

    /** Host pages the request's offloaded streams occupy (what a reload must acquire on the device). */
    int reloadNeed(RequestState r) {
        int need = 0;
        for (CacheStream s : r.streams.values()) {
            if (s.offloaded) {
                need += s.hostPages.length;
            }
        }
        return need;
    }

    /** Bring the request back; false, with nothing moved, when its pages do not fit even after eviction. */
    boolean reload(RequestState r) {
        if (!st.makeRoom(reloadNeed(r))) {
            return false;
        }
        for (CacheStream s : r.streams.values()) {
            if (s.offloaded) {
                int[] pages = st.arena.acquire(s.hostPages.length);
                host.load(s.hostPages, pages);
                discard(s);
                for (int p : pages) {
                    s.pages.add(p);
                }
                s.generation++;
            }
        }
        return true;
    }

    /** Forget a stream's host copy (reloaded, reset or removed). */
    void discard(CacheStream s) {
        if (s.offloaded) {
            host.free(s.hostPages);
            s.hostPages = null;
            s.offloaded = false;
        }
    }
}
