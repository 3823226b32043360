package org.mstar.jobs;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * When each request of a benchmark run was sent and when its responses reached the consumer. Only arrival
 * times are observable from outside the job (when the operator emitted a token is not), so every latency here
 * is measured from the send: what a client of the responses topic actually waits. One thread sends, another
 * reports arrivals.
 */
final class DeliveryTimeline {
    private final Map<String, Long> sentNanos = new ConcurrentHashMap<>();
    private final Map<String, List<Long>> tokenNanos = new HashMap<>();
    private final Map<String, Long> finishedNanos = new HashMap<>();
    private final Map<String, Double> engineTtftMillis = new HashMap<>();
    private final List<String> errors = new ArrayList<>();

    /** Call before the request is handed to the producer, so no response can precede it. */
    void sent(String requestId, long nanos) {
        sentNanos.put(requestId, nanos);
    }

    /** A response read by the consumer at {@code nanos}, repeats already dropped. */
    void arrived(Response response, long nanos) {
        Object event = response.getEvent();
        if (event instanceof TokenEvent t) {
            tokenNanos.computeIfAbsent(t.getRequestId(), id -> new ArrayList<>()).add(nanos);
        } else if (event instanceof GenerateResult r) {
            finishedNanos.put(r.getRequestId(), nanos);
            engineTtftMillis.put(r.getRequestId(), r.getTimings().getTimeToFirstTokenMs());
        } else if (event instanceof ErrorEvent e) {
            errors.add(e.getRequestId() + ": " + e.getMessage());
        }
    }

    List<String> errors() {
        return errors;
    }

    /** Percentiles over the requests that were sent; histograms in microseconds. */
    Summary summary() {
        Summary s = new Summary(new Histogram(3), new Histogram(3), new Histogram(3), new Histogram(3));
        for (Map.Entry<String, Long> sent : sentNanos.entrySet()) {
            String id = sent.getKey();
            List<Long> tokens = tokenNanos.getOrDefault(id, List.of());
            if (!tokens.isEmpty()) {
                s.firstToken.recordValue(micros(tokens.get(0) - sent.getValue()));
            }
            for (int i = 1; i < tokens.size(); i++) {
                s.interArrival.recordValue(micros(tokens.get(i) - tokens.get(i - 1)));
            }
            Long finished = finishedNanos.get(id);
            if (finished != null) {
                s.completion.recordValue(micros(finished - sent.getValue()));
                s.engineTtft.recordValue(Math.round(engineTtftMillis.get(id) * 1000));
            }
        }
        return s;
    }

    private static long micros(long nanos) {
        return Math.max(0, TimeUnit.NANOSECONDS.toMicros(nanos));
    }

    /**
     * @param firstToken send → first TokenEvent at the consumer
     * @param interArrival between consecutive TokenEvents of a request at the consumer
     * @param completion send → GenerateResult at the consumer
     * @param engineTtft the operator's own time to first token (from the GenerateResult): the part of
     *     {@code firstToken} that is not delivery
     */
    record Summary(Histogram firstToken, Histogram interArrival, Histogram completion, Histogram engineTtft) {
        long requests() {
            return completion.getTotalCount();
        }

        long tokens() {
            return firstToken.getTotalCount() + interArrival.getTotalCount();
        }
    }
}
