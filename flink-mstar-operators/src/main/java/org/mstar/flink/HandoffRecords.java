package org.mstar.flink;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.annotation.Internal;
import org.mstar.engine.PrefillHandoff;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.KvHandoffHeader;
import org.mstar.schemas.ResourceStateHeader;

/**
 * Cuts an engine's {@link PrefillHandoff} into {@link KvHandoff} records of bounded size and puts it back together:
 * part 0 carries the header, and the resource states, concatenated in header order, are sliced over the parts.
 * The states are opaque here: each is its resource's codec's bytes, moved as they are.
 */
@Internal
public final class HandoffRecords {
    private HandoffRecords() {}

    /**
     * @param request the request as received, carried in the header
     * @param maxDataBytes most state bytes in one record (>= 1)
     * @param nowMillis wall-clock time of publication
     */
    public static List<KvHandoff> split(PrefillHandoff h, GenerateRequest request, int maxDataBytes, long nowMillis) {
        if (maxDataBytes < 1) {
            throw new IllegalArgumentException("a hand-off record must carry at least one byte, got " + maxDataBytes);
        }
        List<ResourceStateHeader> states = new ArrayList<>();
        List<ByteBuffer> sources = new ArrayList<>();
        h.states().forEach((key, bytes) -> {
            states.add(new ResourceStateHeader(key, (long) bytes.remaining()));
            sources.add(bytes);
        });
        long total = h.stateBytes();
        int parts = (int) Math.max(1, (total + maxDataBytes - 1) / maxDataBytes);
        KvHandoffHeader header = new KvHandoffHeader(request, ints(h.prompt()), ints(h.generated()), states,
                nowMillis);
        List<KvHandoff> records = new ArrayList<>(parts);
        for (int part = 0; part < parts; part++) {
            long from = (long) part * maxDataBytes;
            ByteBuffer data = range(sources, from, Math.min(total, from + maxDataBytes));
            records.add(new KvHandoff(h.requestId(), part, parts, part == 0 ? header : null, data));
        }
        return records;
    }

    /**
     * Bytes {@code [from, to)} of the states laid end to end: a view of the one state holding them all (the KV
     * cache's part of a large hand-off is not copied here), else a copy joining the states the range crosses.
     */
    private static ByteBuffer range(List<ByteBuffer> states, long from, long to) {
        if (from == to) {
            return ByteBuffer.allocate(0);
        }
        long start = 0;
        int i = 0;
        while (start + states.get(i).remaining() <= from && i < states.size() - 1) {
            start += states.get(i).remaining();
            i++;
        }
        ByteBuffer first = states.get(i);
        if (to <= start + first.remaining()) {
            int at = first.position() + (int) (from - start);
            return first.duplicate().limit(at + (int) (to - from)).position(at).slice();
        }
        ByteBuffer data = ByteBuffer.allocate((int) (to - from));
        long at = from;
        for (; data.hasRemaining(); i++) {
            ByteBuffer src = states.get(i);
            int offset = (int) (at - start);
            int n = Math.min(data.remaining(), src.remaining() - offset);
            data.put(src.duplicate().position(src.position() + offset).limit(src.position() + offset + n));
            at += n;
            start += src.remaining();
        }
        return data.flip();
    }

    /** Bytes of resource state a record carries. */
    public static int dataBytes(KvHandoff record) {
        return record.getData().remaining();
    }

    /**
     * The hand-off of {@code parts}, all records of one, by part index. Its states are views of one buffer: the
     * record's own data when there is one part, else the parts' data joined once.
     *
     * @throws IllegalArgumentException when a part is missing or the lengths do not add up
     */
    public static PrefillHandoff assemble(Map<Integer, KvHandoff> parts) {
        KvHandoff first = parts.get(0);
        if (first == null || first.getHeader() == null) {
            throw new IllegalArgumentException("hand-off without its header part");
        }
        int count = first.getParts();
        long total = 0;
        for (int i = 0; i < count; i++) {
            KvHandoff p = parts.get(i);
            if (p == null) {
                throw new IllegalArgumentException("hand-off of '" + first.getRequestId() + "' lacks part " + i + " of "
                        + count);
            }
            total += dataBytes(p);
        }
        KvHandoffHeader header = first.getHeader();
        long expected = header.getResourceStates().stream().mapToLong(ResourceStateHeader::getStateBytes).sum();
        if (total != expected) {
            throw new IllegalArgumentException("hand-off of '" + first.getRequestId() + "' carries " + total
                    + " state bytes, its header announces " + expected);
        }
        ByteBuffer all = joined(parts, count, total);
        Map<String, ByteBuffer> states = new LinkedHashMap<>();
        int at = all.position();
        for (ResourceStateHeader s : header.getResourceStates()) {
            int n = Math.toIntExact(s.getStateBytes());
            states.put(s.getResourceKey().toString(), all.duplicate().position(at).limit(at + n));
            at += n;
        }
        return new PrefillHandoff(first.getRequestId().toString(), toInts(header.getPromptTokenIds()),
                toInts(header.getGeneratedTokenIds()), states);
    }

    private static ByteBuffer joined(Map<Integer, KvHandoff> parts, int count, long total) {
        if (count == 1) {
            return parts.get(0).getData().duplicate();
        }
        ByteBuffer all = ByteBuffer.allocate(Math.toIntExact(total));
        for (int i = 0; i < count; i++) {
            all.put(parts.get(i).getData().duplicate());
        }
        return all.flip();
    }

    private static List<Integer> ints(int[] values) {
        List<Integer> out = new ArrayList<>(values.length);
        for (int v : values) {
            out.add(v);
        }
        return out;
    }

    private static int[] toInts(List<Integer> values) {
        return values.stream().mapToInt(Integer::intValue).toArray();
    }
}
