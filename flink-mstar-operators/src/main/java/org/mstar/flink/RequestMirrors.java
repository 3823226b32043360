package org.mstar.flink;

import org.apache.flink.api.common.state.KeyedStateStore;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.mstar.schemas.RequestMirror;

/**
 * The keyed state that mirrors live requests, for the current key (the request id): a {@link RequestMirror} written
 * once (the request, its arrival, its model and the tokens known then) and the tokens generated after it, appended
 * in one chunk per checkpoint. A checkpoint thus adds only the tokens generated since the one before (with RocksDB,
 * an append is a merge: nothing written earlier is read or written again), instead of rewriting every live
 * request's whole token list; a restore, at any parallelism, concatenates mirror and chunks.
 */
final class RequestMirrors {
    /** Name of the chunks' state: the mirror's state name with this suffix. */
    static final String TOKENS_SUFFIX = "-tokens";

    private final ValueState<RequestMirror> mirrors;
    private final ListState<int[]> tokens;

    /** @param name the mirror state's name; the operator iterates the keys of this state to find live requests */
    RequestMirrors(KeyedStateStore store, String name) {
        mirrors = store.getState(new ValueStateDescriptor<>(name, new AvroTypeInfo<>(RequestMirror.class)));
        tokens = store.getListState(new ListStateDescriptor<>(name + TOKENS_SUFFIX,
                PrimitiveArrayTypeInfo.INT_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    /** Brings the current key's state up to {@code request}: its mirror the first time, new tokens after that. */
    void save(LiveRequest request, String modelFingerprint) throws Exception {
        if (!request.mirrored()) {
            mirrors.update(request.mirror(modelFingerprint));
        } else {
            int[] chunk = request.takeUnsavedTokens();
            if (chunk.length > 0) {
                tokens.add(chunk);
            }
        }
    }

    /** Writes {@code mirror} as the current key's, with no later tokens. */
    void start(RequestMirror mirror) throws Exception {
        tokens.clear();
        mirrors.update(mirror);
    }

    /** The current key's mirror; null when it has none. */
    RequestMirror mirror() throws Exception {
        return mirrors.value();
    }

    /** The current key's request as saved: its mirror and later tokens ({@code mirror} is {@link #mirror()}). */
    LiveRequest restore(RequestMirror mirror) throws Exception {
        Iterable<int[]> chunks = tokens.get();
        return LiveRequest.restored(mirror, chunks == null ? java.util.List.of() : chunks);
    }

    /** Drops the current key's mirror and tokens. */
    void clear() {
        mirrors.clear();
        tokens.clear();
    }
}
