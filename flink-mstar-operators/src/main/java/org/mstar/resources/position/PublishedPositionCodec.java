package org.mstar.resources.position;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.WireFormat;

/**
 * {@link PublishedPositionInfo} as bytes. Wire format, little-endian:
 * <pre>
 *   int   magic "POS1" (0x31534f50)
 *   int   n, the labels
 *   n x { int labelBytes; byte[labelBytes] label (UTF-8); int nextPosition }   in label order
 * </pre>
 */
public final class PublishedPositionCodec implements PublishedInfoCodec<PublishedPositionInfo> {
    private static final int MAGIC = 0x31534f50;

    @Override
    public Class<PublishedPositionInfo> type() {
        return PublishedPositionInfo.class;
    }

    @Override
    public ByteBuffer encode(PublishedPositionInfo info) {
        Map<String, Integer> counters = new TreeMap<>(info.counters());
        int size = 8 + counters.keySet().stream().mapToInt(label -> WireFormat.stringSize(label) + 4).sum();
        ByteBuffer b = WireFormat.allocate(size, MAGIC).putInt(counters.size());
        counters.forEach((label, next) -> {
            WireFormat.putString(b, label);
            b.putInt(next);
        });
        return b.flip();
    }

    @Override
    public PublishedPositionInfo decode(ByteBuffer bytes) {
        return WireFormat.decode(bytes, MAGIC, "PublishedPositionInfo", b -> {
            Map<String, Integer> counters = new HashMap<>();
            for (int n = b.getInt(), i = 0; i < n; i++) {
                counters.put(WireFormat.getString(b), b.getInt());
            }
            return new PublishedPositionInfo(counters);
        });
    }
}
