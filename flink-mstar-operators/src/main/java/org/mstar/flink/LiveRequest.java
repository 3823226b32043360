package org.mstar.flink;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.RequestMirror;

/**
 * The operator's in-memory record of one live request: what it was asked and what it has generated. The keyed
 * {@link RequestMirror} is written from it before a checkpoint barrier when it changed since the last one.
 */
final class LiveRequest {
    final GenerateRequest request;
    /** Processing time of first arrival (epoch ms), kept across restores. */
    final long arrivalMillis;
    private int[] generated;
    private int count;
    /** Whether the keyed mirror lags behind this record. */
    private boolean dirty;

    private LiveRequest(GenerateRequest request, long arrivalMillis, int[] generated, boolean dirty) {
        this.request = request;
        this.arrivalMillis = arrivalMillis;
        this.generated = generated;
        this.count = generated.length;
        this.dirty = dirty;
    }

    static LiveRequest arrived(GenerateRequest request, long nowMillis) {
        return new LiveRequest(request, nowMillis, new int[0], true);
    }

    static LiveRequest restored(RequestMirror mirror) {
        int[] ids = mirror.getGeneratedTokenIds().stream().mapToInt(Integer::intValue).toArray();
        return new LiveRequest(mirror.getRequest(), mirror.getArrivalTimeMs(), ids, false);
    }

    void append(int tokenId) {
        if (count == generated.length) {
            generated = Arrays.copyOf(generated, Math.max(16, count * 2));
        }
        generated[count++] = tokenId;
        dirty = true;
    }

    /** Whether the request has produced its first token. */
    boolean started() {
        return count > 0;
    }

    int[] generated() {
        return Arrays.copyOf(generated, count);
    }

    boolean dirty() {
        return dirty;
    }

    /**
     * The mirror to write now; from here on the record counts as written.
     *
     * @param modelFingerprint the {@link ModelFingerprint} of the model generating the request
     */
    RequestMirror flush(String modelFingerprint) {
        List<Integer> ids = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            ids.add(generated[i]);
        }
        dirty = false;
        return new RequestMirror(request, ids, arrivalMillis, modelFingerprint);
    }
}
