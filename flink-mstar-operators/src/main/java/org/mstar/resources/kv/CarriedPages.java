package org.mstar.resources.kv;

import java.nio.ByteBuffer;

/**
 * The contents of a stream's pages, in sequence order from its first page, as a decoded hand-off carries them: a
 * read-only view of the received bytes, laid out {@code [layers, numPages, 2, pageSize, kvHeads, headDim]} (the
 * layout {@link KvPool} gathers and scatters). Not serialisable: it lives only on the side that decoded it.
 */
public final class CarriedPages {
    private final ByteBuffer data;
    private final int layers;
    private final int numPages;
    /** Bytes of one page in one layer. */
    private final int layerPageBytes;

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
    }

    public int numPages() {
        return numPages;
    }

    /**
     * Pages {@code [from, to)} in the pool's layout. All of them are the view itself; a part of them (a reader
     * whose prefix cache holds the leading pages) is one layer range after another, gathered into a buffer of
     * its own, since a layer's range is not adjacent to the next layer's.
     */
    ByteBuffer pages(int from, int to) {
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
