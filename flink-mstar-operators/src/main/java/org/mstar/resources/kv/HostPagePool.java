package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Host memory that offloaded KV pages wait in: {@code capacity} pages, each the bytes of one device
 * page across all layers, with its own FIFO allocator. A page's buffer is allocated the first time it
 * is used and kept, so an idle pool costs nothing and a busy one does not churn the heap.
 *
 * <p>Not thread-safe; the KV manager's lock guards it.
 */
final class HostPagePool {
    private final KvPool pool;
    private final ArrayDeque<Integer> free = new ArrayDeque<>();
    private final byte[][] pages;

    HostPagePool(KvPool pool, int capacity) {
        this.pool = pool;
        this.pages = new byte[capacity][];
        for (int p = 0; p < capacity; p++) {
            free.addLast(p);
        }
    }

    int capacity() {
        return pages.length;
    }

    int freeCount() {
        return free.size();
    }

    List<Integer> freeList() {
        return new ArrayList<>(free);
    }

    /** Copy device pages to host; returns the host pages holding them, or null (nothing copied) if short. */
    int[] store(int[] devicePages) {
        int n = devicePages.length;
        if (n > free.size()) {
            return null;
        }
        byte[] gathered = pool.gather(devicePages);
        int layerBytes = pool.pageBytes() / pool.layers();
        int[] host = new int[n];
        for (int i = 0; i < n; i++) {
            int h = free.pollFirst();
            if (pages[h] == null) {
                pages[h] = new byte[pool.pageBytes()];
            }
            for (int l = 0; l < pool.layers(); l++) {
                System.arraycopy(gathered, (l * n + i) * layerBytes, pages[h], l * layerBytes, layerBytes);
            }
            host[i] = h;
        }
        return host;
    }

    /** Copy host pages back into device pages (same count, same order). */
    void load(int[] hostPages, int[] devicePages) {
        int n = hostPages.length;
        int layerBytes = pool.pageBytes() / pool.layers();
        byte[] data = new byte[n * pool.pageBytes()];
        for (int i = 0; i < n; i++) {
            for (int l = 0; l < pool.layers(); l++) {
                System.arraycopy(pages[hostPages[i]], l * layerBytes, data, (l * n + i) * layerBytes, layerBytes);
            }
        }
        pool.scatter(devicePages, ByteBuffer.wrap(data));
    }

    void free(int[] hostPages) {
        for (int h : hostPages) {
            free.addLast(h);
        }
    }
}
