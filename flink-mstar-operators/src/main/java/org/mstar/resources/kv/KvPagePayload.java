package org.mstar.resources.kv;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import org.mstar.device.DType;

/**
 * Page contents a {@link KvTransport} read moves between two KV caches: whole pages in the order of the
 * read, laid out {@code [layers, numPages, planes, pageSize, kvHeads, headDim]} in {@code dtype} (two planes, K
 * and V, for NHD pages; one for latent pages), plus the
 * token range {@code [startToken, endToken)} of the stream they carry. Plain data: Java-serialisable, or
 * {@link #toBytes()} / {@link #fromBytes(byte[])} for a byte field. (A disaggregated hand-off carries its
 * pages in the bytes of {@link PublishedKVCodec} instead.)
 *
 * <p>Pages move whole. The first page may repeat tokens the reader already holds (the same bytes, since
 * the producer did not rewind) and the last may carry bytes past {@code endToken}, which land past the
 * reader's stored length where nothing reads them.
 */
public record KvPagePayload(int layers, int numPages, int planes, int pageSize, int kvHeads, int headDim,
                            DType dtype, int startToken, int endToken, byte[] data) implements Serializable {
    private static final int MAGIC = 0x4b565032; // "KVP2": the planes joined the geometry

    public KvPagePayload {
        if (planes != 1 && planes != 2) {
            throw new IllegalArgumentException("pages hold 1 (latent) or 2 (K, V) planes, got " + planes);
        }
        long expected = (long) layers * numPages * planes * pageSize * kvHeads * headDim * dtype.bytes();
        if (data == null || data.length != expected) {
            throw new IllegalArgumentException("payload of " + (data == null ? "no" : data.length)
                    + " bytes does not match " + numPages + " pages of [" + layers + ", " + planes + ", " + pageSize
                    + ", " + kvHeads + ", " + headDim + "] " + dtype);
        }
        if (startToken < 0 || endToken < startToken) {
            throw new IllegalArgumentException("bad token range [" + startToken + ", " + endToken + ")");
        }
    }

    /** A compact little-endian encoding: magic, the geometry, the dtype name, the range, the bytes. */
    public byte[] toBytes() {
        byte[] dt = dtype.name().getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(4 * 10 + dt.length + 4 + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(MAGIC).putInt(layers).putInt(numPages).putInt(planes).putInt(pageSize).putInt(kvHeads).putInt(headDim);
        b.putInt(dt.length).put(dt);
        b.putInt(startToken).putInt(endToken);
        b.putInt(data.length).put(data);
        return b.array();
    }

    public static KvPagePayload fromBytes(byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        if (b.getInt() != MAGIC) {
            throw new IllegalArgumentException("not a KV page payload");
        }
        int layers = b.getInt();
        int numPages = b.getInt();
        int planes = b.getInt();
        int pageSize = b.getInt();
        int kvHeads = b.getInt();
        int headDim = b.getInt();
        byte[] dt = new byte[b.getInt()];
        b.get(dt);
        int start = b.getInt();
        int end = b.getInt();
        byte[] data = new byte[b.getInt()];
        b.get(data);
        return new KvPagePayload(layers, numPages, planes, pageSize, kvHeads, headDim,
                DType.valueOf(new String(dt, StandardCharsets.UTF_8)), start, end, data);
    }
}
