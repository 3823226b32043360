package org.mstar.resources.kv;

import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.IntStream;
import org.mstar.resources.PublishedInfo;

/**
 * What a KV manager exports for a request: per rank, per label, a {@link KVSequenceInfo}. Each rank
 * publishes its own shard and the conductor merges them with {@link #update}; the world size lets a
 * reader refuse a publication cut for another tensor-parallel layout.
 */
public final class PublishedKVInfo implements PublishedInfo, Serializable {
    private final int worldSize;
    private final Map<Integer, Map<String, KVSequenceInfo>> byRank = new TreeMap<>();

    public PublishedKVInfo(int worldSize) {
        if (worldSize <= 0) {
            throw new IllegalArgumentException("world size must be > 0, got " + worldSize);
        }
        this.worldSize = worldSize;
    }

    public int worldSize() {
        return worldSize;
    }

    public void put(int rank, String label, KVSequenceInfo seq) {
        byRank.computeIfAbsent(rank, r -> new LinkedHashMap<>()).put(label, seq);
    }

    /** One rank's streams by label (empty when that rank published nothing). */
    public Map<String, KVSequenceInfo> forRank(int rank) {
        return Collections.unmodifiableMap(byRank.getOrDefault(rank, Map.of()));
    }

    /** The ranks that published streams. */
    public Set<Integer> ranks() {
        return Collections.unmodifiableSet(byRank.keySet());
    }

    /** Every published stream's length, over all ranks. */
    @Override
    public IntStream storedLengths() {
        return byRank.values().stream().flatMap(labels -> labels.values().stream()).mapToInt(KVSequenceInfo::seqLen);
    }

    /** Merge a newer publication: per rank and label, its entry replaces ours. */
    @Override
    public void update(PublishedInfo other) {
        if (!(other instanceof PublishedKVInfo o)) {
            throw new IllegalArgumentException("cannot merge " + other.getClass().getSimpleName() + " into KV publish info");
        }
        if (o.worldSize != worldSize) {
            throw new IllegalArgumentException("cannot merge KV publish info of world size " + o.worldSize
                    + " into one of world size " + worldSize);
        }
        o.byRank.forEach((rank, labels) -> labels.forEach((label, seq) -> put(rank, label, seq)));
    }

    /** Gives back the pages a same-device publisher lent for these streams ({@link KvShelf}). */
    @Override
    public void release() {
        byRank.values().forEach(labels -> labels.values().forEach(seq -> {
            if (seq.carried() != null) {
                seq.carried().release();
            }
        }));
    }

    @Override
    public PublishedKVInfo copy() {
        PublishedKVInfo c = new PublishedKVInfo(worldSize);
        byRank.forEach((rank, labels) -> labels.forEach((label, seq) -> c.put(rank, label, seq))); // immutable
        return c;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("PublishedKVInfo{worldSize=").append(worldSize);
        byRank.forEach((rank, labels) -> labels.forEach((label, seq) -> sb.append(", ").append(rank).append('/')
                .append(label).append(": ").append(seq.seqLen()).append(" tokens@").append(seq.resetGeneration())));
        return sb.append('}').toString();
    }
}
