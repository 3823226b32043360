package org.mstar.device.cpu;

import org.mstar.device.DType;

/**
 * Element offsets into a KV pool {@code [layers, pages, planes, pageSize, kvHeads, headDim]}, relative to the
 * pool view (as {@link FloatRows} and {@link CpuTensor#getFloat} take them). An NHD pool has two planes (K, V); a
 * latent (MLA) pool has one, whose rows are read as both keys and values.
 */
final class KvPoolGeometry {
    private final int layers;
    private final int pages;
    private final int planes;
    private final int pageSize;
    private final int kvHeads;
    private final int headDim;

    KvPoolGeometry(CpuTensor pool) {
        if (pool.rank() != 6 || pool.dim(2) != 1 && pool.dim(2) != 2) {
            throw new IllegalArgumentException("KV pool must be [layers, pages, 1 or 2, pageSize, kvHeads, headDim], got "
                    + pool);
        }
        if (!pool.dtype().isFloat() && pool.dtype() != DType.F8_E4M3) {
            throw new IllegalArgumentException("KV pool must hold floats or FP8 codes, got " + pool);
        }
        this.layers = (int) pool.dim(0);
        this.pages = (int) pool.dim(1);
        this.planes = (int) pool.dim(2);
        this.pageSize = (int) pool.dim(3);
        this.kvHeads = (int) pool.dim(4);
        this.headDim = (int) pool.dim(5);
    }

    int layers() { return layers; }
    int pages() { return pages; }
    int planes() { return planes; }
    int pageSize() { return pageSize; }
    int kvHeads() { return kvHeads; }
    int headDim() { return headDim; }

    /** Elements of one token's K (or V) vector over all KV heads. */
    int tokenElems() {
        return kvHeads * headDim;
    }

    /** Elements in one page of one layer, every plane. */
    int pageElems() {
        return planes * pageSize * tokenElems();
    }

    /** Offset of (layer, page). */
    int page(int layer, int page) {
        if (layer < 0 || layer >= layers) {
            throw new IndexOutOfBoundsException("layer " + layer + " outside pool of " + layers);
        }
        if (page < 0 || page >= pages) {
            throw new IndexOutOfBoundsException("page " + page + " outside pool of " + pages);
        }
        return (layer * pages + page) * pageElems();
    }

    /** Offset of one token's K (kv = 0) or V (kv = 1) vector, all heads; a one-plane pool's row for either. */
    int slot(int layer, int page, int kv, int offset) {
        if (offset < 0 || offset >= pageSize) {
            throw new IndexOutOfBoundsException("offset " + offset + " outside page of " + pageSize);
        }
        return page(layer, page) + (Math.min(kv, planes - 1) * pageSize + offset) * tokenElems();
    }
}
