package org.mstar.resources.kv;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.TreeMap;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.WireFormat;

/**
 * {@link PublishedKVInfo} as bytes, with the contents of the pages it names, so the bytes alone carry a finished
 * prefill's KV to another cache. One codec per {@link KVManager}: it encodes that cache's rank's streams, reading
 * their pages from its pool, and decodes into streams whose pages that cache's retrieval takes straight from the
 * received bytes ({@link KVSequenceInfo#carried()}).
 *
 * <p>Wire format, little-endian:
 * <pre>
 *   int    magic "KVH1" (0x3148564b)
 *   int    worldSize; int rank                         the publishing shard
 *   int    layers; int pageSize; int kvHeads; int headDim
 *   string dtype name                                  int byte count, UTF-8
 *   int    n, the streams
 *   n x { string label; int seqLen; long resetGeneration; int numPages }   in label order
 *   n x   numPages pages, [layers, numPages, 2, pageSize, kvHeads, headDim] in dtype   in header order
 * </pre>
 * A reader refuses a layout other than its own pool's when it decodes.
 */
public final class PublishedKVCodec implements PublishedInfoCodec<PublishedKVInfo> {
    private static final int MAGIC = 0x3148564b;

    /** Gathers pages of the codec's pool into a buffer, under its manager's lock. */
    @FunctionalInterface
    interface PageGather {
        void gather(int[] pages, ByteBuffer dst);
    }

    private final KvPool pool;
    private final PageGather gather;
    private final int worldSize;
    private final int rank;

    PublishedKVCodec(KvPool pool, PageGather gather, int worldSize, int rank) {
        this.pool = pool;
        this.gather = gather;
        this.worldSize = worldSize;
        this.rank = rank;
    }

    @Override
    public Class<PublishedKVInfo> type() {
        return PublishedKVInfo.class;
    }

    /** @throws IllegalArgumentException for another world size, or streams of another rank (its pages are not here) */
    @Override
    public ByteBuffer encode(PublishedKVInfo info) {
        Map<String, KVSequenceInfo> streams = ownStreams(info);
        long size = 4 + headerSize(streams);
        for (KVSequenceInfo seq : streams.values()) {
            size += (long) seq.pageIndices().length * pool.pageBytes();
        }
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a hand-off of " + size + " bytes does not fit one buffer");
        }
        ByteBuffer b = putHeader(WireFormat.allocate((int) size, MAGIC), streams);
        for (KVSequenceInfo seq : streams.values()) {
            int[] pages = seq.pageIndices();
            gather.gather(pages, b);
            b.position(b.position() + pages.length * pool.pageBytes());
        }
        return b.flip();
    }

    @Override
    public PublishedKVInfo decode(ByteBuffer bytes) {
        return WireFormat.decode(bytes, MAGIC, "PublishedKVInfo", b -> {
            Header h = readHeader(b);
            PublishedKVInfo info = new PublishedKVInfo(h.worldSize);
            for (int i = 0; i < h.labels.length; i++) {
                long length = (long) h.pages[i] * pool.pageBytes();
                if (h.pages[i] < 0 || length > b.remaining()) {
                    throw new BufferUnderflowException();
                }
                ByteBuffer view = b.slice().limit((int) length);
                b.position(b.position() + (int) length);
                info.put(h.rank, h.labels[i], new KVSequenceInfo(h.seqLens[i], "", new int[0], h.resets[i],
                        new CarriedPages(view, pool.layers(), h.pages[i], pool.layerPageBytes())));
            }
            if (b.hasRemaining()) {
                throw new IllegalArgumentException(b.remaining() + " bytes past the last stream's pages");
            }
            return info;
        });
    }

    /**
     * This rank's streams of {@code info}, in label order.
     *
     * @throws IllegalArgumentException for another world size, or streams of another rank (its pages are not here)
     */
    Map<String, KVSequenceInfo> ownStreams(PublishedKVInfo info) {
        if (info.worldSize() != worldSize || !info.ranks().stream().allMatch(r -> r == rank)) {
            throw new IllegalArgumentException("rank " + rank + " of " + worldSize + " cannot encode " + info
                    + ": only its own streams' pages are here");
        }
        return new TreeMap<>(info.forRank(rank));
    }

    /** Bytes {@link #putHeader} writes for {@code streams}. */
    int headerSize(Map<String, KVSequenceInfo> streams) {
        int size = 4 * 7 + WireFormat.stringSize(pool.dtype().name());
        for (String label : streams.keySet()) {
            size += WireFormat.stringSize(label) + 16;
        }
        return size;
    }

    /** Writes the world, the pool's layout and each stream's label, length, reset generation and page count. */
    ByteBuffer putHeader(ByteBuffer b, Map<String, KVSequenceInfo> streams) {
        b.putInt(worldSize).putInt(rank)
                .putInt(pool.layers()).putInt(pool.pageSize()).putInt(pool.kvHeads()).putInt(pool.headDim());
        WireFormat.putString(b, pool.dtype().name());
        b.putInt(streams.size());
        streams.forEach((label, seq) -> {
            WireFormat.putString(b, label);
            b.putInt(seq.seqLen()).putLong(seq.resetGeneration()).putInt(seq.pageIndices().length);
        });
        return b;
    }

    /** What {@link #putHeader} wrote, per stream in its order. */
    record Header(int worldSize, int rank, String[] labels, int[] seqLens, long[] resets, int[] pages) {}

    /** @throws IllegalArgumentException when the pages' layout is not this cache's */
    Header readHeader(ByteBuffer b) {
        int world = b.getInt();
        int from = b.getInt();
        checkLayout(b.getInt(), b.getInt(), b.getInt(), b.getInt(), WireFormat.getString(b));
        int n = b.getInt();
        String[] labels = new String[n];
        int[] seqLens = new int[n];
        long[] resets = new long[n];
        int[] pages = new int[n];
        for (int i = 0; i < n; i++) {
            labels[i] = WireFormat.getString(b);
            seqLens[i] = b.getInt();
            resets[i] = b.getLong();
            pages[i] = b.getInt();
        }
        return new Header(world, from, labels, seqLens, resets, pages);
    }

    private void checkLayout(int layers, int pageSize, int kvHeads, int headDim, String dtype) {
        if (layers != pool.layers() || pageSize != pool.pageSize() || kvHeads != pool.kvHeads()
                || headDim != pool.headDim() || !dtype.equals(pool.dtype().name())) {
            throw new IllegalArgumentException("KV pages of [" + layers + " layers, pages of " + pageSize + ", "
                    + kvHeads + "x" + headDim + " " + dtype + "] do not match this cache's [" + pool.layers()
                    + " layers, pages of " + pool.pageSize() + ", " + pool.kvHeads() + "x" + pool.headDim() + " "
                    + pool.dtype() + "]");
        }
    }
}
