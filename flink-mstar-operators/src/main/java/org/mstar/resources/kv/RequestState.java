package org.mstar.resources.kv;

import java.util.LinkedHashMap;
import java.util.Map;
import org.mstar.resources.KVReqConfig;

/** One request as the KV manager holds it: its per-request config and its streams by label. */
final class RequestState {
    final String requestId;
    final KVReqConfig cfg;
    /** Insertion-ordered so publication and offload walk labels in a stable order. */
    final Map<String, CacheStream> streams = new LinkedHashMap<>();

    RequestState(String requestId, KVReqConfig cfg) {
        this.requestId = requestId;
        this.cfg = cfg;
    }

    boolean anyInFlight() {
        return streams.values().stream().anyMatch(s -> s.stepInFlight);
    }

    boolean anyOffloaded() {
        return streams.values().stream().anyMatch(s -> s.offloaded);
    }
}
