package org.mstar.resources.position;

import java.util.HashMap;
import java.util.Map;
import org.mstar.resources.PublishedInfo;

/**
 * Where each of a request's streams has reached: label → next position. Exported by
 * {@link RopeManager#publish} so that a node which receives the request's KV elsewhere (a decode worker
 * after disaggregated prefill, a CFG branch on another GPU) continues the positions instead of
 * restarting them at 0.
 */
public final class PublishedPositionInfo implements PublishedInfo {
    private final Map<String, Integer> counters;

    /** @param counters label → next position; copied */
    public PublishedPositionInfo(Map<String, Integer> counters) {
        this.counters = new HashMap<>(counters);
    }

    /** Label → next position; a read-only view. */
    public Map<String, Integer> counters() {
        return Map.copyOf(counters);
    }

    /** Per label the larger position wins, so merging a stale publication never rewinds a stream. */
    @Override
    public void update(PublishedInfo other) {
        if (!(other instanceof PublishedPositionInfo p)) {
            throw new IllegalArgumentException("cannot merge " + other.getClass().getName() + " into position info");
        }
        p.counters.forEach((label, next) -> counters.merge(label, next, Math::max));
    }

    @Override
    public PublishedPositionInfo copy() {
        return new PublishedPositionInfo(counters);
    }

    @Override
    public String toString() {
        return "PublishedPositionInfo" + counters;
    }
}
