package org.mstar.resources.position;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.Fork;

/**
 * Per request, per stream label, the next position to hand out; a missing label is at 0. A request's map
 * is never replaced once created, so a repeated ingest keeps its progress.
 */
final class PositionCounters {
    private final Map<String, Map<String, Integer>> byRequest = new HashMap<>();

    /** What a fork target held before a staged pre-fork copied onto it; {@code previous} null: no counter. */
    record ForkUndo(String rid, String label, Integer previous) {}

    void open(String rid) {
        byRequest.putIfAbsent(rid, new HashMap<>());
    }

    void reset(String rid) {
        Map<String, Integer> streams = byRequest.get(rid);
        if (streams != null) {
            streams.clear();
        }
    }

    void remove(String rid) {
        byRequest.remove(rid);
    }

    int position(String rid, String label) {
        Map<String, Integer> streams = byRequest.get(rid);
        return streams == null ? 0 : streams.getOrDefault(label, 0);
    }

    /** label → next position of {@code rid}: a copy, empty when it has none. */
    Map<String, Integer> snapshot(String rid) {
        Map<String, Integer> streams = byRequest.get(rid);
        return streams == null ? Map.of() : Map.copyOf(streams);
    }

    void advance(String rid, String label, int by) {
        streams(rid).merge(label, by, Integer::sum);
    }

    /** Moves the counter up to {@code next}, never down. */
    void raise(String rid, String label, int next) {
        streams(rid).merge(label, next, Math::max);
    }

    void set(String rid, String label, int next) {
        streams(rid).put(label, next);
    }

    /** {@code counter[to] = counter[from]}; returns what the target held, for {@link #undo}. */
    ForkUndo fork(String rid, Fork f) {
        Map<String, Integer> streams = streams(rid);
        return new ForkUndo(rid, f.to(), streams.put(f.to(), streams.getOrDefault(f.from(), 0)));
    }

    /** Reverts fork copies, last first; a target that had no counter loses it again. */
    void undo(List<ForkUndo> undo) {
        for (int i = undo.size() - 1; i >= 0; i--) {
            ForkUndo u = undo.get(i);
            Map<String, Integer> streams = byRequest.get(u.rid());
            if (streams == null) {
                continue;
            }
            if (u.previous() == null) {
                streams.remove(u.label());
            } else {
                streams.put(u.label(), u.previous());
            }
        }
    }

    private Map<String, Integer> streams(String rid) {
        return byRequest.computeIfAbsent(rid, r -> new HashMap<>());
    }
}
