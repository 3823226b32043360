package org.mstar.device.cpu;

/** Element offsets into a KV pool {@code [layers, pages, 2, pageSize, kvHeads, headDim]}. */
final class KvPoolGeometry {
    private final int layers;
    private final int pages;
    private final int pageSize;
    private final int tokenElems;
    private final int base;

    KvPoolGeometry(CpuTensor pool) {
        if (pool.rank() != 6 || pool.dim(2) != 2) {
            throw new IllegalArgumentException("KV pool must be [layers, pages, 2, pageSize, kvHeads, headDim], got " + pool);
        }
        this.layers = (int) pool.dim(0);
        this.pages = (int) pool.dim(1);
        this.pageSize = (int) pool.dim(3);
        this.tokenElems = (int) (pool.dim(4) * pool.dim(5));
        this.base = pool.offset();
    }

    int layers() { return layers; }
    int pageSize() { return pageSize; }
    int tokenElems() { return tokenElems; }

    /** Elements in one page of one layer, K and V together. */
    int pageElems() {
        return 2 * pageSize * tokenElems;
    }

    /** Offset of (layer, page) in the pool's array. */
    int page(int layer, int page) {
        if (page < 0 || page >= pages) {
            throw new IndexOutOfBoundsException("page " + page + " outside pool of " + pages);
        }
        return base + (layer * pages + page) * pageElems();
    }

    /** Offset of one token's K (kv = 0) or V (kv = 1) vector; relative to the view (for setFloat). */
    int slot(int layer, int page, int kv, int offset) {
        return page(layer, page) - base + (kv * pageSize + offset) * tokenElems;
    }

    void checkSlot(int page, int offset) {
        if (offset < 0 || offset >= pageSize) {
            throw new IndexOutOfBoundsException("offset " + offset + " outside page of " + pageSize);
        }
        page(0, page);
    }
}
