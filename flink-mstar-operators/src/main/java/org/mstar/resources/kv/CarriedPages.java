package org.mstar.resources.kv;

import java.nio.ByteBuffer;

/**
 * The contents of a stream's pages, in sequence order from its first page, as a decoded hand-off carries them: a
 * read-only view of the received bytes, laid out {@code [layers, numPages, 2, pageSize, kvHeads, headDim]} (the
 * layout {@link KvPool} gathers and scatters), or, for a same-device hand-off, pages another cache on this device
 * lent ({@link KvShelf}), copied pool to pool when retrieved. Not serialisable: it lives only on the side that
 * decoded it.
 */
public final class CarriedPages {
    /** Null when the pages are lent. */
    private final ByteBuffer data;
    private final int layers;
    private final int numPages;
    /** Bytes of one page in one layer. */
    private final int layerPageBytes;
    /** The cache that lent the pages under {@link #ticket}, as stream {@link #label}; null when carried as bytes. */
    private final KVManager lender;
    private final long ticket;
    private final String label;

    /** @param data {@code layers * numPages * layerPageBytes} bytes, from its position to its limit */
    CarriedPages(ByteBuffer data, int layers, int numPages, int layerPageBytes) {
        if ((long) layers * numPages * layerPageBytes != data.remaining()) {
            throw new IllegalArgumentException(data.remaining() + " bytes are not " + numPages + " pages of "
                    + layers + " layers of " + layerPageBytes + " bytes");
        }
        this.data = data.asReadOnlyBuffer();
        this.layers = layers;
        this.numPages = numPages;
        this.layerPageBytes = layerPageBytes;
        this.lender = null;
        this.ticket = 0;
        this.label = null;
    }

    private CarriedPages(KVManager lender, long ticket, String label, int numPages) {
        this.data = null;
        this.layers = 0;
        this.numPages = numPages;
        this.layerPageBytes = 0;
        this.lender = lender;
        this.ticket = ticket;
        this.label = label;
    }

    /** Stream {@code label}'s {@code numPages} pages, which {@code lender} lent under {@code ticket}. */
    static CarriedPages lent(KVManager lender, long ticket, String label, int numPages) {
        return new CarriedPages(lender, ticket, label, numPages);
    }

    public int numPages() {
        return numPages;
    }

    /** Whether the pages are another cache's on this device rather than bytes. */
    boolean isLent() {
        return lender != null;
    }

    /** Copies lent pages {@code [from, to)} onto {@code dstPages} of {@code dst}, on the device; returns the bytes. */
    long copyLent(int from, int to, KvPool dst, int[] dstPages) {
        return lender.copyLent(ticket, label, from, to, dst, dstPages);
    }

    /** Gives lent pages back to their lender; a no-op for carried bytes and after the first call. */
    void release() {
        if (lender != null) {
            lender.returnLend(ticket);
        }
    }

    /**
     * Pages {@code [from, to)} in the pool's layout. All of them are the view itself; a part of them (a reader
     * whose prefix cache holds the leading pages) is one layer range after another, gathered into a buffer of
     * its own, since a layer's range is not adjacent to the next layer's.
     */
    ByteBuffer pages(int from, int to) {
        if (data == null) {
            throw new IllegalStateException("lent pages have no bytes here: copy them with copyLent");
        }
        if (from == 0 && to == numPages) {
            return data.duplicate();
        }
        ByteBuffer out = ByteBuffer.allocate(layers * (to - from) * layerPageBytes);
        for (int layer = 0; layer < layers; layer++) {
            int at = data.position() + (layer * numPages + from) * layerPageBytes;
            out.put(data.duplicate().position(at).limit(at + (to - from) * layerPageBytes));
        }
        return out.flip();
    }
}
