package org.mstar.flink;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.annotation.Internal;
import org.mstar.engine.PrefillHandoff;
import org.mstar.resources.kv.KvPagePayload;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.KvHandoffHeader;
import org.mstar.schemas.KvStreamHeader;

/**
 * Cuts an engine's {@link PrefillHandoff} into {@link KvHandoff} records of bounded size and puts it back together:
 * part 0 carries the header, and the streams' encoded page payloads, concatenated in header order, are sliced over
 * the parts.
 */
@Internal
public final class HandoffRecords {
    private HandoffRecords() {}

    /**
     * @param request the request as received, carried in the header
     * @param maxDataBytes most KV bytes in one record (>= 1)
     * @param nowMillis wall-clock time of publication
     */
    public static List<KvHandoff> split(PrefillHandoff h, GenerateRequest request, int maxDataBytes, long nowMillis) {
        if (maxDataBytes < 1) {
            throw new IllegalArgumentException("a hand-off record must carry at least one byte, got " + maxDataBytes);
        }
        List<KvStreamHeader> streams = new ArrayList<>();
        List<byte[]> payloads = new ArrayList<>();
        long total = 0;
        for (Map.Entry<String, PrefillHandoff.KvStream> e : new java.util.TreeMap<>(h.kv()).entrySet()) {
            byte[] bytes = e.getValue().pages().toBytes();
            payloads.add(bytes);
            streams.add(new KvStreamHeader(e.getKey(), e.getValue().seqLen(), e.getValue().resetGeneration(),
                    (long) bytes.length));
            total += bytes.length;
        }
        int parts = (int) Math.max(1, (total + maxDataBytes - 1) / maxDataBytes);
        KvHandoffHeader header = new KvHandoffHeader(request, ints(h.prompt()), ints(h.generated()), streams,
                new HashMap<>(h.positions()), nowMillis);
        List<KvHandoff> records = new ArrayList<>(parts);
        int stream = 0;
        int at = 0;
        for (int part = 0; part < parts; part++) {
            int size = (int) Math.min(maxDataBytes, total - (long) part * maxDataBytes);
            byte[] data = new byte[size];
            int filled = 0;
            while (filled < size) {
                byte[] src = payloads.get(stream);
                int n = Math.min(size - filled, src.length - at);
                System.arraycopy(src, at, data, filled, n);
                filled += n;
                at += n;
                if (at == src.length) {
                    stream++;
                    at = 0;
                }
            }
            records.add(new KvHandoff(h.requestId(), part, parts, part == 0 ? header : null, ByteBuffer.wrap(data)));
        }
        return records;
    }

    /** Bytes of KV a record carries. */
    public static int dataBytes(KvHandoff record) {
        return record.getData().remaining();
    }

    /**
     * The hand-off of {@code parts}, all records of one, by part index.
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
        long expected = header.getKvStreams().stream().mapToLong(KvStreamHeader::getPayloadBytes).sum();
        if (total != expected) {
            throw new IllegalArgumentException("hand-off of '" + first.getRequestId() + "' carries " + total
                    + " KV bytes, its header announces " + expected);
        }
        Map<String, PrefillHandoff.KvStream> kv = new LinkedHashMap<>();
        int part = 0;
        ByteBuffer current = parts.get(0).getData().duplicate();
        for (KvStreamHeader s : header.getKvStreams()) {
            byte[] bytes = new byte[Math.toIntExact(s.getPayloadBytes())];
            int filled = 0;
            while (filled < bytes.length) {
                while (!current.hasRemaining()) {
                    current = parts.get(++part).getData().duplicate();
                }
                int n = Math.min(bytes.length - filled, current.remaining());
                current.get(bytes, filled, n);
                filled += n;
            }
            kv.put(s.getLabel().toString(), new PrefillHandoff.KvStream(s.getSeqLen(), s.getResetGeneration(),
                    KvPagePayload.fromBytes(bytes)));
        }
        Map<String, Integer> positions = new HashMap<>();
        header.getPositionCounters().forEach((label, next) -> positions.put(label.toString(), next));
        return new PrefillHandoff(first.getRequestId().toString(), toInts(header.getPromptTokenIds()),
                toInts(header.getGeneratedTokenIds()), kv, positions);
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
