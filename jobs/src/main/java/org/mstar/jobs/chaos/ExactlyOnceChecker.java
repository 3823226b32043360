package org.mstar.jobs.chaos;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.TokenEvent;

/**
 * Checks a chaos run's history: every request sent ended exactly once (one result or one error event), its token
 * indexes came 0..n-1 once each and in order, its tokens and result equal the fault-free reference, it ended within
 * a stated bound after it was sent or the last fault was over (whichever came later), and nothing answers a request
 * that was not sent. Each violation comes with the request's slice of history: the request,
 * every response to it as read, and the faults applied while it was open.
 */
final class ExactlyOnceChecker {
    private final Timeline timeline;
    private final long lastFaultOverMillis;
    private final Duration stuckBound;
    final List<String> violations = new ArrayList<>();
    final Map<Integer, Integer> errorsByCode = new TreeMap<>();
    int results;
    int tokens;

    /**
     * @param lastFaultOverMillis when the last fault was over (its processes started again, the broker back)
     * @param stuckBound how long after that, or after its send if later, a request may take to end
     */
    ExactlyOnceChecker(Timeline timeline, long lastFaultOverMillis, Duration stuckBound) {
        this.timeline = timeline;
        this.lastFaultOverMillis = lastFaultOverMillis;
        this.stuckBound = stuckBound;
    }

    void check(List<OpenLoopLoad.SentRequest> sent, Map<String, String> unacknowledged,
               List<CommittedResponses.Seen> seen, Map<String, List<Integer>> reference) {
        Map<String, List<CommittedResponses.Seen>> byRequest = new LinkedHashMap<>();
        for (CommittedResponses.Seen s : seen) {
            if (s.response() == null) {
                violations.add("a record that is not a Response at partition " + s.partition() + " offset " + s.offset());
            } else {
                byRequest.computeIfAbsent(s.requestId(), k -> new ArrayList<>()).add(s);
            }
        }
        Map<String, OpenLoopLoad.SentRequest> sentById = new HashMap<>();
        sent.forEach(r -> sentById.put(r.request().getRequestId(), r));
        for (String id : byRequest.keySet()) {
            if (!sentById.containsKey(id) && !unacknowledged.containsKey(id)) {
                violations.add("responses to " + id + ", which was never sent: " + byRequest.get(id));
            }
        }
        for (OpenLoopLoad.SentRequest r : sent) {
            List<CommittedResponses.Seen> history = byRequest.getOrDefault(r.request().getRequestId(), List.of());
            String problem = problem(r.request(), history, reference.get(r.request().getRequestId()));
            if (problem == null) {
                problem = stuck(r, history);
            }
            if (problem != null) {
                violations.add(slice(r, history, problem));
            }
        }
    }

    /** What is wrong with one request's responses, or null. */
    private String problem(GenerateRequest request, List<CommittedResponses.Seen> history, List<Integer> expected) {
        List<TokenEvent> tokenEvents = new ArrayList<>();
        List<Object> endings = new ArrayList<>();
        for (CommittedResponses.Seen s : history) {
            Object event = s.response().getEvent();
            if (event instanceof TokenEvent t) {
                tokenEvents.add(t);
            } else {
                endings.add(event);
            }
        }
        tokens += tokenEvents.size();
        if (endings.isEmpty()) {
            return "unanswered: no result and no error event";
        }
        if (endings.size() > 1) {
            return "ended " + endings.size() + " times";
        }
        for (int i = 0; i < tokenEvents.size(); i++) {
            if (tokenEvents.get(i).getIndex() != i) {
                return "token " + i + " read has index " + tokenEvents.get(i).getIndex() + " (expected 0..n-1 once each,"
                        + " in order)";
            }
        }
        List<Integer> ids = tokenEvents.stream().map(TokenEvent::getTokenId).toList();
        if (endings.get(0) instanceof ErrorEvent e) {
            errorsByCode.merge(e.getCode(), 1, Integer::sum);
            return null;
        }
        GenerateResult result = (GenerateResult) endings.get(0);
        results++;
        if (!ids.equals(expected)) {
            return "token ids " + ids + " differ from the fault-free reference " + expected;
        }
        if (!result.getTokenIds().equals(expected)) {
            return "the result's token ids " + result.getTokenIds() + " differ from the reference " + expected;
        }
        if (!result.getMetadata().equals(request.getMetadata())) {
            return "the result's metadata " + result.getMetadata() + " is not the request's " + request.getMetadata();
        }
        return null;
    }

    /** Whether the request ended later than the bound allows (the history has its one ending). */
    private String stuck(OpenLoopLoad.SentRequest r, List<CommittedResponses.Seen> history) {
        long endedAt = history.stream().filter(CommittedResponses.Seen::ends).findFirst().orElseThrow().readAtMillis();
        long from = Math.max(r.sentAtMillis(), lastFaultOverMillis);
        if (endedAt - from <= stuckBound.toMillis()) {
            return null;
        }
        return "stuck: ended " + Duration.ofMillis(endedAt - from) + " after "
                + (from == r.sentAtMillis() ? "it was sent" : "the last fault was over") + ", more than " + stuckBound;
    }

    private String slice(OpenLoopLoad.SentRequest r, List<CommittedResponses.Seen> history, String problem) {
        StringBuilder out = new StringBuilder(r.request().getRequestId()).append(": ").append(problem)
                .append("\n  request (sent ").append(Instant.ofEpochMilli(r.sentAtMillis())).append("): ")
                .append(r.request());
        for (CommittedResponses.Seen s : history) {
            out.append("\n  read ").append(Instant.ofEpochMilli(s.readAtMillis())).append(" p")
                    .append(s.partition()).append("@").append(s.offset()).append(": ").append(s.response().getEvent());
        }
        long end = history.isEmpty() ? Long.MAX_VALUE : history.get(history.size() - 1).readAtMillis();
        for (Timeline.Event e : timeline.between(r.sentAtMillis(), end)) {
            out.append("\n  fault ").append(e);
        }
        return out.toString();
    }
}
