package org.mstar.resources;

import java.util.List;
import java.util.Map;

/**
 * Per-request KV parameters: which labels a (node, walk) opens and publishes, the prefix-cache keys of
 * each label's prompt pages, and the per-label layouts and loop caps only the KV ingest reads.
 *
 * <p>Label selection: {@code neededLabelsPerNodeWalk[(node, walk)]}, else {@code neededLabelsPerNode[node]},
 * else {@code neededLabels}, else {@code ["main"]}.
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
                          Map<String, Integer> loopCaps) implements ResourceReqConfig {

    public KVReqConfig {
        neededLabelsPerNode = neededLabelsPerNode == null ? Map.of() : Map.copyOf(neededLabelsPerNode);
        neededLabelsPerNodeWalk = neededLabelsPerNodeWalk == null ? Map.of() : Map.copyOf(neededLabelsPerNodeWalk);
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

    /** This config without layouts and caps, which only the KV ingest reads. */
    public KVReqConfig withoutLayout() {
        return new KVReqConfig(neededLabels, neededLabelsPerNode, neededLabelsPerNodeWalk, publishLabelsPerNodeWalk,
                finalPublishLabelsPerNodeWalk, prefixKeys, prefixTail, prefixDecode, prefixCache, null, null);
    }
}
