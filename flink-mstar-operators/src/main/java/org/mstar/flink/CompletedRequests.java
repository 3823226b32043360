package org.mstar.flink;

import java.time.Duration;
import java.time.Instant;
import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;

/**
 * The ids of requests this operator served, remembered for {@link GenerateOptions#REQUEST_ID_RETENTION}, so that a
 * request arriving later under such an id is answered with a 409 instead of being generated again (its tokens would
 * interleave with the first request's under one id). Kept in keyed state, one timestamp per id, with Flink's state
 * TTL: an expired id reads as unknown and RocksDB drops it in compaction, so the record stays bounded by the ids
 * served within one retention time. It is checkpointed with the rest of the keyed state, so a restore rolls it back
 * together with the requests it describes.
 */
final class CompletedRequests {
    static final String STATE = "served-at";

    private final Duration retention;
    /** Null when the retention is zero: nothing is remembered. */
    private final ValueState<Long> servedAt;

    CompletedRequests(KeyedStateStore store, Duration retention) {
        this.retention = retention;
        if (retention.isZero()) {
            servedAt = null;
        } else {
            ValueStateDescriptor<Long> d = new ValueStateDescriptor<>(STATE, Types.LONG);
            d.enableTimeToLive(StateTtlConfig.newBuilder(retention)
                    .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                    .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                    .build());
            servedAt = store.getState(d);
        }
    }

    /** Remembers the current key's request as served at {@code nowMillis} (epoch ms). */
    void record(long nowMillis) throws Exception {
        if (servedAt != null) {
            servedAt.update(nowMillis);
        }
    }

    /** The 409 message for a request under the current key, or null when no request of that id was served lately. */
    String conflict(String requestId) throws Exception {
        Long at = servedAt == null ? null : servedAt.value();
        if (at == null) {
            return null;
        }
        // disaggregated, prefill records an id at hand-off, while decode may still be generating under it
        return "request id '" + requestId + "' was already taken (at " + Instant.ofEpochMilli(at) + ") by a request"
                + " that was served or is still generating; ids are remembered for " + retention + " ('"
                + GenerateOptions.REQUEST_ID_RETENTION.key() + "'): send the request again under a new id";
    }
}
