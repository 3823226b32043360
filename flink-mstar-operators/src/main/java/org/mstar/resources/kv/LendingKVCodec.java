package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.WireFormat;

/**
 * {@link PublishedKVInfo} as a handle for a hand-off within a process: the publishing cache lends the streams' pages
 * under a ticket of the process's {@link KvShelf} and the bytes carry the ticket and the streams' lengths, no page
 * contents.
 * Decoding claims the ticket; the pages are copied pool to pool when the request is retrieved, then given back
 * ({@link PublishedKVInfo#release()}). It decodes the page-carrying encoding of {@link PublishedKVCodec} as well, so a
 * decode cache takes hand-offs from prefill caches of its process and elsewhere alike.
 *
 * <p>Wire format, little-endian:
 * <pre>
 *   int    magic "KVL1" (0x314c564b)
 *   string shelf id; long ticket
 *   int    worldSize; int rank
 *   int    layers; int pageSize; int kvHeads; int headDim; string dtype name
 *   int    n, the streams
 *   n x { string label; int seqLen; long resetGeneration; int numPages }   in label order
 * </pre>
 */
final class LendingKVCodec implements PublishedInfoCodec<PublishedKVInfo> {
    static final int MAGIC = 0x314c564b;

    private final KVManager cache;
    private final KvShelf shelf;
    private final PublishedKVCodec pages;

    LendingKVCodec(KVManager cache, KvShelf shelf, PublishedKVCodec pages) {
        this.cache = cache;
        this.shelf = shelf;
        this.pages = pages;
    }

    @Override
    public Class<PublishedKVInfo> type() {
        return PublishedKVInfo.class;
    }

    /** Lends {@code info}'s pages (they stay out of this cache's reuse until given back) and writes the ticket. */
    @Override
    public ByteBuffer encode(PublishedKVInfo info) {
        Map<String, KVSequenceInfo> streams = pages.ownStreams(info);
        long ticket = cache.lend(streams, shelf);
        ByteBuffer b = WireFormat.allocate(4 + WireFormat.stringSize(shelf.id()) + 8 + pages.headerSize(streams),
                MAGIC);
        WireFormat.putString(b, shelf.id());
        b.putLong(ticket);
        return pages.putHeader(b, streams).flip();
    }

    /**
     * A publication whose streams' pages are lent to this cache (claimed now), or carried in the bytes.
     *
     * @throws LentPagesGone when the ticket is not this shelf's or its pages were taken back
     */
    @Override
    public PublishedKVInfo decode(ByteBuffer bytes) {
        if (bytes.remaining() < 4 || bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).getInt() != MAGIC) {
            return pages.decode(bytes);
        }
        return WireFormat.decode(bytes, MAGIC, "lent PublishedKVInfo", b -> {
            String shelfId = WireFormat.getString(b);
            long ticket = b.getLong();
            PublishedKVCodec.Header h = pages.readHeader(b);
            if (b.hasRemaining()) {
                throw new IllegalArgumentException(b.remaining() + " bytes past the last stream");
            }
            KVManager lender = shelf.claim(shelfId, ticket);
            if (lender == null || !lender.claimLend(ticket)) {
                throw new LentPagesGone("the pages of ticket " + ticket + " of shelf " + shelfId + " are not lent on"
                        + " this process's shelf " + shelf.id() + " (taken back, or lent in another process)");
            }
            PublishedKVInfo info = new PublishedKVInfo(h.worldSize());
            for (int i = 0; i < h.labels().length; i++) {
                info.put(h.rank(), h.labels()[i], new KVSequenceInfo(h.seqLens()[i], "", new int[0], h.resets()[i],
                        CarriedPages.lent(lender, ticket, h.labels()[i], h.pages()[i])));
            }
            return info;
        });
    }
}
