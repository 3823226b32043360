package org.mstar.engine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.PublishedInfo;

/**
 * A decode engine's prefill hand-offs: checked when they arrive, then imported in arrival order once their
 * pages fit (a hand-off that does not fit yet waits, with those behind it).
 */
final class HandoffInbox {
    /** A received hand-off waiting to be imported, with its resources' publications decoded. */
    private record Incoming(GenerationRequest request, PrefillHandoff handoff, Map<String, PublishedInfo> published,
                            long arrivalNanos) {}

    private final Map<String, Incoming> incoming = new LinkedHashMap<>();
    private final RequestChecks checks;
    private final RequestResources resources;
    /** Null for a colocated engine, which never receives. */
    private final HandoffExchange exchange;

    HandoffInbox(RequestChecks checks, RequestResources resources, HandoffExchange exchange) {
        this.checks = checks;
        this.resources = resources;
        this.exchange = exchange;
    }

    /** @throws IllegalArgumentException (a {@code RequestValidationException} for the request's own fields) */
    void receive(GenerationRequest request, PrefillHandoff handoff) {
        if (!request.requestId().equals(handoff.requestId())) {
            throw new IllegalArgumentException("hand-off of '" + handoff.requestId() + "' given for request '"
                    + request.requestId() + "'");
        }
        // the prompt checks read only the prompt fields: the hand-off's ids stand in for the request's prompt
        int[] prompt = checks.prompt(GenerationRequest.builder(request.requestId()).promptTokenIds(handoff.prompt())
                .maxTokens(request.maxTokens()).build());
        checks.check(request, prompt, handoff.generated());
        resources.sampling(request);
        resources.adapter(request);
        Map<String, PublishedInfo> published = exchange.decode(handoff);
        int[] stored = published.values().stream().flatMapToInt(PublishedInfo::storedLengths).toArray();
        if (handoff.generated().length == 0 || stored.length == 0) {
            throw new IllegalArgumentException("hand-off of '" + request.requestId() + "' carries "
                    + handoff.generated().length + " generated tokens and " + stored.length + " KV streams");
        }
        for (int seqLen : stored) {
            if (seqLen != prompt.length) {
                throw new IllegalArgumentException("hand-off of '" + request.requestId() + "' stores " + seqLen
                        + " tokens of a " + prompt.length + "-token prompt");
            }
        }
        incoming.put(request.requestId(), new Incoming(request, handoff, published, System.nanoTime()));
    }

    /** Imports what fits, in order: the requests now running with their prompt's KV in place. */
    List<LiveRequest> importReady(StepOutputs out) {
        List<LiveRequest> imported = new ArrayList<>();
        for (var it = incoming.values().iterator(); it.hasNext(); ) {
            Incoming in = it.next();
            PrefillHandoff h = in.handoff();
            LiveRequest r = new LiveRequest(in.request(), h.prompt(), h.generated(), in.arrivalNanos());
            resources.open(r);
            HandoffExchange.Retrieval got = exchange.retrieve(r.id(), in.published());
            if (got.outcome().ok() && got.outcome().ready()) {
                it.remove();
                r.computed = h.prompt().length;
                r.cachedPromptTokens = got.localTokens();
                r.probed = true;
                r.status = RequestStatus.RUNNING;
                imported.add(r);
                continue;
            }
            resources.close(r.id());
            if (got.outcome().ok() || got.outcome().reason() instanceof AllocationFailed) {
                break;
            }
            it.remove();
            out.failures.add(new RequestFailure(r.id(), 500, "importing the prefill hand-off failed: "
                    + got.outcome().reason()));
        }
        return imported;
    }

    boolean contains(String requestId) {
        return incoming.containsKey(requestId);
    }

    boolean isEmpty() {
        return incoming.isEmpty();
    }

    int size() {
        return incoming.size();
    }

    void remove(String requestId) {
        incoming.remove(requestId);
    }

    void clear() {
        incoming.clear();
    }
}
