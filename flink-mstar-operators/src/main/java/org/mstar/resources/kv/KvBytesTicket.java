package org.mstar.resources.kv;

import java.nio.ByteBuffer;
import java.util.UUID;
import org.mstar.resources.WireFormat;

/**
 * Where a hand-off's KV bytes wait on the prefill side ({@link KvBytesServer}) and what they are: the server's address
 * and id, the bytes' id there, and their length. A decode side pulls them with {@link KvBytesServer#pull}, which
 * checks the bytes' CRC32C as the server sends it after them.
 *
 * <p>Wire format (inside a {@link NetworkKVCodec} encoding), little-endian: string host; int port; long, long server
 * id; long id; int length.
 */
public record KvBytesTicket(String host, int port, UUID server, long id, int length) {

    public int size() {
        return WireFormat.stringSize(host) + 4 + 16 + 8 + 4;
    }

    public ByteBuffer put(ByteBuffer b) {
        WireFormat.putString(b, host);
        return b.putInt(port).putLong(server.getMostSignificantBits()).putLong(server.getLeastSignificantBits())
                .putLong(id).putInt(length);
    }

    public static KvBytesTicket get(ByteBuffer b) {
        return new KvBytesTicket(WireFormat.getString(b), b.getInt(), new UUID(b.getLong(), b.getLong()), b.getLong(),
                b.getInt());
    }
}
