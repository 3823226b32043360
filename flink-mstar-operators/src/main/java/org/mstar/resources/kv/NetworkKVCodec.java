package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.WireFormat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link PublishedKVInfo} handed to another process by ticket: encoding copies the streams' pages into
 * {@link PublishedKVCodec}'s bytes as before, but offers them on a {@link KvBytesServer} and writes only the ticket;
 * decoding pulls the bytes over TCP, checks their length and checksum and decodes them as {@link PublishedKVCodec}
 * does, so the decode cache takes only the pages its prefix index lacks from them. Bytes that cannot be pulled whole
 * and intact raise {@link LentPagesGone} (logged, with why): the decode side recomputes the prompt. Other encodings go
 * to the codec this one wraps, so a decode cache takes hand-offs of every kind.
 *
 * <p>Wire format, little-endian: int magic "KVN2" (0x324e564b), then the {@link KvBytesTicket}. A ticket of the first
 * format ("KVN1", which carried the checksum), restored from a checkpoint of an earlier version, names a server that
 * is gone with that job: it raises {@link LentPagesGone} as well.
 */
final class NetworkKVCodec implements PublishedInfoCodec<PublishedKVInfo> {
    private static final Logger LOG = LoggerFactory.getLogger(NetworkKVCodec.class);
    static final int MAGIC = 0x324e564b;
    private static final int FIRST_MAGIC = 0x314e564b;

    private final KvBytesServer server;
    private final PublishedKVCodec pages;
    private final PublishedInfoCodec<PublishedKVInfo> other;

    NetworkKVCodec(KvBytesServer server, PublishedKVCodec pages, PublishedInfoCodec<PublishedKVInfo> other) {
        this.server = server;
        this.pages = pages;
        this.other = other;
    }

    @Override
    public Class<PublishedKVInfo> type() {
        return PublishedKVInfo.class;
    }

    @Override
    public ByteBuffer encode(PublishedKVInfo info) {
        KvBytesTicket ticket = server.offer(pages.encode(info));
        return ticket.put(WireFormat.allocate(4 + ticket.size(), MAGIC)).flip();
    }

    /** @throws LentPagesGone when the ticket's bytes cannot be pulled whole and intact */
    @Override
    public PublishedKVInfo decode(ByteBuffer bytes) {
        int magic = bytes.remaining() < 4 ? 0 : bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).getInt();
        if (magic == FIRST_MAGIC) {
            throw gone("a KV ticket of the first format, whose server is gone with its job");
        }
        if (magic != MAGIC) {
            return other.decode(bytes);
        }
        KvBytesTicket ticket = WireFormat.decode(bytes, MAGIC, "KV ticket", b -> {
            KvBytesTicket t = KvBytesTicket.get(b);
            if (b.hasRemaining()) {
                throw new IllegalArgumentException(b.remaining() + " bytes past the ticket");
            }
            return t;
        });
        try {
            return pages.decode(KvBytesServer.pull(ticket));
        } catch (KvBytesGone e) {
            throw gone(e.getMessage());
        }
    }

    private static LentPagesGone gone(String why) {
        LOG.warn("Hand-off KV not pulled, the prompt is recomputed: {}", why);
        return new LentPagesGone(why);
    }
}
