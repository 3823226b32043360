package org.mstar.flink;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.RequestTimings;
import org.mstar.engine.TokenOutput;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.Timings;
import org.mstar.schemas.TokenEvent;
import org.mstar.schemas.Usage;

/** Builds the {@link Response} envelopes of the responses topic from engine outputs. */
public final class Responses {
    public static final int BAD_REQUEST = 400;
    /** The request's id was served already (see {@link GenerateOptions#REQUEST_ID_RETENTION}). */
    public static final int CONFLICT = 409;
    public static final int QUEUE_TIMEOUT = 429;
    public static final int SERVER_ERROR = 500;

    private Responses() {}

    static Response token(TokenOutput t) {
        return wrap(new TokenEvent(t.requestId(), t.index(), t.tokenId(), t.textDelta(),
                t.finish() == null ? null : t.finish().wireName()));
    }

    static Response result(FinishedRequest f, Map<String, String> metadata) {
        List<Integer> ids = Arrays.stream(f.tokenIds()).boxed().toList();
        RequestTimings t = f.timings();
        return wrap(new GenerateResult(f.requestId(), f.text(), ids, f.finish().wireName(),
                new Usage(f.promptTokens(), f.tokenIds().length, f.cachedPromptTokens()),
                new Timings(millis(t.queueNanos()), millis(t.timeToFirstTokenNanos()),
                        millis(t.meanInterTokenNanos()), millis(t.totalNanos())),
                metadata));
    }

    static Response error(String requestId, int code, String message) {
        return wrap(new ErrorEvent(requestId, code, message));
    }

    /** The request a response belongs to; null for an error that names none. */
    public static String requestId(Response response) {
        Object event = response.getEvent();
        if (event instanceof TokenEvent t) {
            return t.getRequestId();
        }
        if (event instanceof GenerateResult r) {
            return r.getRequestId();
        }
        return ((ErrorEvent) event).getRequestId();
    }

    private static Response wrap(Object event) {
        return new Response(event);
    }

    private static double millis(long nanos) {
        return nanos / 1e6;
    }
}
