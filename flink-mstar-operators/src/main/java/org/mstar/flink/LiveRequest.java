package org.mstar.flink;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.RequestMirror;

/**
 * The operator's in-memory record of one live request: what it was asked and what it has generated, and how much
 * of that its keyed state ({@link RequestMirrors}) holds. Before each checkpoint barrier a changed record is saved:
 * the first time as a whole {@link RequestMirror}, after that only the tokens generated since the last save.
 */
final class LiveRequest {
    final GenerateRequest request;
    /** Processing time of first arrival (epoch ms), kept across restores. */
    final long arrivalMillis;
    private int[] generated;
    private int count;
    /** Whether keyed state holds this request's mirror. */
    private boolean mirrored;
    /** How many of the generated tokens keyed state holds. */
    private int saved;

    private LiveRequest(GenerateRequest request, long arrivalMillis, int[] generated, boolean mirrored) {
        this.request = request;
        this.arrivalMillis = arrivalMillis;
        this.generated = generated;
        this.count = generated.length;
        this.mirrored = mirrored;
        this.saved = mirrored ? count : 0;
    }

    static LiveRequest arrived(GenerateRequest request, long nowMillis) {
        return new LiveRequest(request, nowMillis, new int[0], false);
    }

    /**
     * The request as keyed state holds it: its mirror and the chunks of tokens appended after the mirror was
     * written, in order.
     */
    static LiveRequest restored(RequestMirror mirror, Iterable<int[]> laterTokens) {
        int[] ids = mirror.getGeneratedTokenIds().stream().mapToInt(Integer::intValue).toArray();
        for (int[] chunk : laterTokens) {
            int at = ids.length;
            ids = Arrays.copyOf(ids, at + chunk.length);
            System.arraycopy(chunk, 0, ids, at, chunk.length);
        }
        return new LiveRequest(mirror.getRequest(), mirror.getArrivalTimeMs(), ids, true);
    }

    void append(int tokenId) {
        if (count == generated.length) {
            generated = Arrays.copyOf(generated, Math.max(16, count * 2));
        }
        generated[count++] = tokenId;
    }

    /** Whether the request has produced its first token. */
    boolean started() {
        return count > 0;
    }

    int[] generated() {
        return Arrays.copyOf(generated, count);
    }

    /** Whether keyed state lacks anything of this record. */
    boolean unsaved() {
        return !mirrored || saved < count;
    }

    boolean mirrored() {
        return mirrored;
    }

    /**
     * The whole mirror, with every token generated so far; from here on they count as saved.
     *
     * @param modelFingerprint the {@link ModelFingerprint} of the model generating the request
     */
    RequestMirror mirror(String modelFingerprint) {
        List<Integer> ids = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            ids.add(generated[i]);
        }
        mirrored = true;
        saved = count;
        return new RequestMirror(request, ids, arrivalMillis, modelFingerprint);
    }

    /** The tokens generated since the last save; from here on they count as saved. */
    int[] takeUnsavedTokens() {
        int[] chunk = Arrays.copyOfRange(generated, saved, count);
        saved = count;
        return chunk;
    }
}
