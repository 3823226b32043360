package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.device.ByteRanges;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.KVLayout;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.runner.KvPoolDType;

/**
 * The device storage of a paged KV cache: one tensor {@code [layers, pages, planes, pageSize, kvHeads,
 * headDim]} and the page-granular moves the manager makes on it. An NHD pool has two planes (index 0 of the third
 * axis is K, 1 is V); a latent (MLA) pool has one, each token's row of {@code kv_lora_rank + qk_rope_head_dim} values
 * (one head of that width). Page bytes leave and enter the device in the layout {@code gatherPages} produces,
 * {@code [layers, n, planes, pageSize, kvHeads, headDim]}.
 */
final class KvPool {
    private final Device device;
    private final Tensor pool;
    private final int layers;
    private final int planes;
    private final int pageSize;
    private final int kvHeads;
    private final int headDim;
    private final DType dtype;

    KvPool(Device device, DType dtype, int layers, int pages, int planes, int pageSize, int kvHeads, int headDim) {
        this.device = device;
        this.dtype = dtype;
        this.layers = layers;
        this.planes = planes;
        this.pageSize = pageSize;
        this.kvHeads = kvHeads;
        this.headDim = headDim;
        this.pool = device.zeros(dtype, layers, pages, planes, pageSize, kvHeads, headDim);
    }

    /**
     * The pool {@code config} asks for: NHD pages of its (sharded) KV heads in its {@link PagedKVConfig#cacheDType()}
     * over the model's {@code modelDType}, or latent rows of {@link PagedKVConfig#latentDim()} values, which every rank
     * holds whole.
     */
    static KvPool forConfig(PagedKVConfig config, Device device, DType modelDType) {
        DType dtype = KvPoolDType.of(config.cacheDType(), modelDType);
        if (config.layout() == KVLayout.MLA) {
            return new KvPool(device, dtype, config.numLayers(), config.maxNumPages(), 1, config.pageSize(), 1,
                    config.latentDim());
        }
        return new KvPool(device, dtype, config.numLayers(), config.maxNumPages(), 2, config.pageSize(),
                config.numKvHeads(), config.headDim());
    }

    Tensor tensor() { return pool; }
    Device device() { return device; }
    int layers() { return layers; }
    /** 2 (K and V) for NHD pages, 1 for latent pages. */
    int planes() { return planes; }
    int pageSize() { return pageSize; }
    int kvHeads() { return kvHeads; }
    int headDim() { return headDim; }
    DType dtype() { return dtype; }

    /** Bytes of one page across all layers and planes. */
    int pageBytes() {
        return layers * layerPageBytes();
    }

    /** Full copies {@code src[i] → dst[i]} in every layer. */
    void copyPages(int[] src, int[] dst) {
        if (src.length == 0) {
            return;
        }
        try (Tensor s = device.fromInts(src, src.length); Tensor d = device.fromInts(dst, dst.length)) {
            device.ops().copyPages(pool, s, d);
        }
    }

    /** Pages one {@link #copyPagesTo} moves at a time: bounds its device buffer (128 MiB of an 8B model's pages). */
    static final int PAGES_PER_COPY = 64;

    /**
     * Copies pages {@code src} of this pool onto pages {@code dst} of {@code into}, a pool of the same layout on this
     * device or another of this process, never through the host: on this device through a device buffer of at most
     * {@link #PAGES_PER_COPY} pages; onto another, by the other device alone ({@link #copyPagesAcross}).
     *
     * @throws LentPagesGone when {@code into} is on a device of another kind, which cannot read this one's memory
     */
    void copyPagesTo(int[] src, KvPool into, int[] dst) {
        if (into.layers != layers || into.planes != planes || into.pageSize != pageSize || into.kvHeads != kvHeads
                || into.headDim != headDim || into.dtype != dtype || src.length != dst.length) {
            throw new IllegalArgumentException("cannot copy " + src.length + " pages of [" + layers + " layers, "
                    + planes + " planes, " + pageSize + ", " + kvHeads + "x" + headDim + " " + dtype + "] onto "
                    + dst.length + " pages of [" + into.layers + " layers, " + into.planes + " planes, "
                    + into.pageSize + ", " + into.kvHeads + "x" + into.headDim + " " + into.dtype + "]");
        }
        if (!into.device.sameDevice(device)) {
            copyPagesAcross(src, into, dst);
            return;
        }
        for (int from = 0; from < src.length; from += PAGES_PER_COPY) {
            int n = Math.min(PAGES_PER_COPY, src.length - from);
            try (Tensor s = device.fromInts(Arrays.copyOfRange(src, from, from + n), n);
                 Tensor d = into.device.fromInts(Arrays.copyOfRange(dst, from, from + n), n);
                 Tensor buf = device.allocate(dtype, layers, n, planes, pageSize, kvHeads, headDim)) {
                device.ops().gatherPages(pool, s, buf);
                into.device.ops().scatterPages(into.pool, d, buf);
            }
        }
    }

    /**
     * {@link #copyPagesTo} a pool of another device: the receiving device copies each layer's runs of consecutive
     * pages (consecutive on both sides) straight from this pool's memory. This device's stream is not touched, so the
     * caller need not drive it: the pages must be complete (lent pages are: their prefill step has ended).
     */
    private void copyPagesAcross(int[] src, KvPool into, int[] dst) {
        if (into.device.isCuda() != device.isCuda()) {
            throw new LentPagesGone("pages on " + device.name() + " cannot be copied onto " + into.device.name());
        }
        if (src.length == 0) {
            return;
        }
        List<long[]> runs = new ArrayList<>(); // {first index, pages}
        for (int i = 0, start = 0; i < src.length; i++) {
            boolean ends = i + 1 == src.length || src[i + 1] != src[i] + 1 || dst[i + 1] != dst[i] + 1;
            if (ends) {
                runs.add(new long[] {start, i + 1 - start});
                start = i + 1;
            }
        }
        long chunk = layerPageBytes();
        long[] sources = new long[layers * runs.size()];
        long[] targets = new long[sources.length];
        long[] lengths = new long[sources.length];
        for (int layer = 0, r = 0; layer < layers; layer++) {
            for (long[] run : runs) {
                int first = (int) run[0];
                sources[r] = ((long) layer * pages() + src[first]) * chunk;
                targets[r] = ((long) layer * into.pages() + dst[first]) * chunk;
                lengths[r++] = run[1] * chunk;
            }
        }
        into.device.copyFrom(device, pool, into.pool, new ByteRanges(sources, targets, lengths));
    }

    /** Pages the pool holds. */
    private int pages() {
        return (int) pool.dim(1);
    }

    /** Bytes of one page in one layer, every plane. */
    int layerPageBytes() {
        return planes * pageSize * kvHeads * headDim * dtype.bytes();
    }

    /** The bytes of {@code pages}, laid out {@code [layers, n, planes, pageSize, kvHeads, headDim]}. */
    byte[] gather(int[] pages) {
        byte[] out = new byte[pages.length * pageBytes()];
        gather(pages, ByteBuffer.wrap(out));
        return out;
    }

    /** {@link #gather(int[])} into {@code dst}, from its position; the position does not move. */
    void gather(int[] pages, ByteBuffer dst) {
        if (pages.length == 0) {
            return;
        }
        try (Tensor ids = device.fromInts(pages, pages.length);
             Tensor buf = device.allocate(dtype, layers, pages.length, planes, pageSize, kvHeads, headDim)) {
            device.ops().gatherPages(pool, ids, buf);
            device.copyToHost(buf, dst.duplicate());
        }
    }

    /** Inverse of {@link #gather}: write {@code data} (from its position to its limit) into {@code pages}. */
    void scatter(int[] pages, ByteBuffer data) {
        if (data.remaining() != pages.length * pageBytes()) {
            throw new IllegalArgumentException(data.remaining() + " bytes for " + pages.length + " pages of "
                    + pageBytes());
        }
        if (pages.length == 0) {
            return;
        }
        try (Tensor ids = device.fromInts(pages, pages.length);
             Tensor buf = device.allocate(dtype, layers, pages.length, planes, pageSize, kvHeads, headDim)) {
            device.copyFromHost(data, buf);
            device.ops().scatterPages(pool, ids, buf);
        }
    }

    /**
     * K and V of tokens {@code [0, tokens)} of a stream on {@code pages}, layer {@code layer}, each
     * {@code [tokens, kvHeads, headDim]} widened to fp32; a latent pool's rows come as K, with an empty V.
     */
    float[][] readTokens(int layer, int[] pages, int tokens) {
        int tokenElems = kvHeads * headDim;
        float[] k = new float[tokens * tokenElems];
        float[] v = new float[planes == 2 ? tokens * tokenElems : 0];
        if (tokens == 0) {
            return new float[][] {k, v};
        }
        int n = pages.length;
        float[] all;
        try (Tensor ids = device.fromInts(pages, n);
             Tensor buf = device.allocate(dtype, layers, n, planes, pageSize, kvHeads, headDim)) {
            device.ops().gatherPages(pool, ids, buf);
            all = device.toFloats(buf);
        }
        int pageElems = planes * pageSize * tokenElems;
        for (int t = 0; t < tokens; t++) {
            int base = (layer * n + t / pageSize) * pageElems + (t % pageSize) * tokenElems;
            System.arraycopy(all, base, k, t * tokenElems, tokenElems);
            if (planes == 2) {
                System.arraycopy(all, base + pageSize * tokenElems, v, t * tokenElems, tokenElems);
            }
        }
        return new float[][] {k, v};
    }

    /** Write per-token K and V ({@code [n, kvHeads, headDim]}) of one layer at the given addresses. */
    void append(int layer, Tensor k, Tensor v, Tensor pages, Tensor offsets) {
        device.ops().kvAppend(pool, layer, k, v, pages, offsets);
    }
}
