package org.mstar.resources;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Per-request KV parameters: which labels a (node, walk) opens and publishes, the prefix-cache keys of
 * each label's prompt pages, and the per-label layouts and loop caps only the KV ingest reads.
 *
 * <p>{@code prefixSeeds} gives, per label, the key the label's first page follows (absent: {@code PrefixKeys.NO_PREV}):
 * a request whose KV depends on more than its tokens (an adapter's weights) roots its chain there, so its pages
 * never match another's, including pages its generated tokens fill later.
 *
 * <p>Label selection: {@code neededLabelsPerNodeWalk[(node, walk)]}, else {@code neededLabelsPerNode[node]},
 * else {@code neededLabels}, else {@code ["main"]}. Publish selection: {@link #publishLabels}.
 */
public record KVReqConfig(List<String> neededLabels,
                          Map<String, List<String>> neededLabelsPerNode,
                          Map<NodeWalk, List<String>> neededLabelsPerNodeWalk,
                          Map<NodeWalk, List<String>> publishLabelsPerNodeWalk,
                          Map<NodeWalk, List<String>> finalPublishLabelsPerNodeWalk,
                          Map<String, List<byte[]>> prefixKeys,
                          Map<String, int[]> prefixTail,
                          Map<String, String> prefixDecode,
                          boolean prefixCache,
                          Map<String, StreamLayout> kvLayout,
                          Map<String, Integer> loopCaps,
                          Map<String, byte[]> prefixSeeds) implements ResourceReqConfig {

    public KVReqConfig {
        neededLabelsPerNode = neededLabelsPerNode == null ? Map.of() : Map.copyOf(neededLabelsPerNode);
        neededLabelsPerNodeWalk = neededLabelsPerNodeWalk == null ? Map.of() : Map.copyOf(neededLabelsPerNodeWalk);
        prefixSeeds = prefixSeeds == null ? Map.of() : Map.copyOf(prefixSeeds);
    }

    /** Every chain rooted at {@code PrefixKeys.NO_PREV}. */
    public KVReqConfig(List<String> neededLabels, Map<String, List<String>> neededLabelsPerNode,
                       Map<NodeWalk, List<String>> neededLabelsPerNodeWalk,
                       Map<NodeWalk, List<String>> publishLabelsPerNodeWalk,
                       Map<NodeWalk, List<String>> finalPublishLabelsPerNodeWalk, Map<String, List<byte[]>> prefixKeys,
                       Map<String, int[]> prefixTail, Map<String, String> prefixDecode, boolean prefixCache,
                       Map<String, StreamLayout> kvLayout, Map<String, Integer> loopCaps) {
        this(neededLabels, neededLabelsPerNode, neededLabelsPerNodeWalk, publishLabelsPerNodeWalk,
                finalPublishLabelsPerNodeWalk, prefixKeys, prefixTail, prefixDecode, prefixCache, kvLayout, loopCaps,
                null);
    }

    /** Everything default: label "main", prefix cache on, nothing keyed. */
    public static KVReqConfig defaults() {
        return new KVReqConfig(null, null, null, null, null, null, null, null, true, null, null);
    }

    public List<String> labels(String node, String walk) {
        List<String> l = neededLabelsPerNodeWalk.get(new NodeWalk(node, walk));
        if (l == null) l = neededLabelsPerNode.get(node);
        if (l == null) l = neededLabels;
        return l == null ? List.of(Segment.MAIN) : l;
    }

    /**
     * Which of the {@code available} labels a (node, walk) publishes. Ordinary publication: no map
     * means every available label, otherwise the map's entry for (node, walk), or none. After a loop
     * stops ({@code afterStop}): no map means none.
     */
    public List<String> publishLabels(String node, String walk, List<String> available, boolean afterStop) {
        Map<NodeWalk, List<String>> map = afterStop ? finalPublishLabelsPerNodeWalk : publishLabelsPerNodeWalk;
        if (map == null) {
            return afterStop ? List.of() : List.copyOf(available);
        }
        List<String> chosen = new ArrayList<>();
        for (String label : map.getOrDefault(new NodeWalk(node, walk), List.of())) {
            if (available.contains(label)) {
                chosen.add(label);
            }
        }
        return chosen;
    }

    /**
     * A 400 when some label would hold more positions at the request's loop caps than the pool's
     * {@code max_seq_len}. Labels under retention are exempt: their window is bounded by its budget.
     * Only a paged KV spec bounds anything; other specs (or none) pass.
     */
    @Override
    public void validate(NodeResourceSpec spec) {
        Map<String, Integer> caps = caps();
        caps.forEach((loop, cap) -> {
            if (cap < 0) {
                throw new RequestValidationException("loop_caps", "loop '" + loop + "' has a negative cap " + cap);
            }
        });
        PagedKVConfig pool = pagedConfig(spec);
        if (pool == null || kvLayout == null) {
            return;
        }
        kvLayout.forEach((label, layout) -> {
            long positions = layout.positions(caps);
            if (layout.retention() == null && positions > pool.maxSeqLen()) {
                throw new RequestValidationException("kv_layout", "label '" + label + "' would hold " + positions
                        + " positions at the request's loop caps " + caps + ", over max_seq_len " + pool.maxSeqLen());
            }
        });
    }

    /**
     * For each loop some label without retention grows in: the most iterations it can run (the other
     * loops at their caps) while every such label stays within {@code max_seq_len} and all labels
     * together fit the pool's pages (less the sink page). Loops nothing bounds are left out.
     */
    @Override
    public Map<String, Integer> loopRoom(NodeResourceSpec spec) {
        PagedKVConfig pool = pagedConfig(spec);
        Map<String, Integer> room = new TreeMap<>();
        if (pool == null || kvLayout == null) {
            return room;
        }
        TreeSet<String> loops = new TreeSet<>();
        for (StreamLayout l : kvLayout.values()) {
            if (l.retention() == null) {
                l.growth().stream().filter(g -> g.tokensPerIteration() > 0).forEach(g -> loops.add(g.loop()));
            }
        }
        for (String loop : loops) {
            Map<String, Integer> caps = new TreeMap<>(caps());
            caps.put(loop, 0);
            long hi = Long.MAX_VALUE;
            for (StreamLayout l : kvLayout.values()) {
                int g = l.growthPer(loop);
                if (l.retention() == null && g > 0) {
                    hi = Math.min(hi, Math.max(-1, (pool.maxSeqLen() - l.positions(caps)) / g));
                }
            }
            long lo = -1;
            while (lo < hi) {
                long mid = lo + (hi - lo + 1) / 2;
                caps.put(loop, (int) Math.min(mid, Integer.MAX_VALUE));
                if (totalPages(caps, pool.pageSize()) <= pool.maxNumPages() - 1) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            room.put(loop, (int) Math.max(0, Math.min(lo, Integer.MAX_VALUE)));
        }
        return room;
    }

    private long totalPages(Map<String, Integer> caps, int pageSize) {
        long n = 0;
        for (StreamLayout l : kvLayout.values()) {
            n += l.pages(caps, pageSize);
        }
        return n;
    }

    private Map<String, Integer> caps() {
        return loopCaps == null ? Map.of() : loopCaps;
    }

    private static PagedKVConfig pagedConfig(NodeResourceSpec spec) {
        return spec instanceof KVSpec kv && kv.config() instanceof PagedKVConfig p ? p : null;
    }

    /** This config without layouts and caps, which only the KV ingest reads. */
    public KVReqConfig withoutLayout() {
        return new KVReqConfig(neededLabels, neededLabelsPerNode, neededLabelsPerNodeWalk, publishLabelsPerNodeWalk,
                finalPublishLabelsPerNodeWalk, prefixKeys, prefixTail, prefixDecode, prefixCache, null, null,
                prefixSeeds);
    }
}
