package org.mstar.engine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.kv.LentPagesGone;

/**
 * A decode engine's prefill hand-offs: checked when they arrive, then imported in arrival order once their
 * pages fit (a hand-off that does not fit yet waits, with those behind it).
 *
 * <p>A same-device hand-off holds pages its prefill cache lent ({@link org.mstar.resources.kv.KvShelf}) from its
 * arrival until it is imported or dropped, when they are given back. One whose lent pages went away before they
 * were copied is recomputed from its prompt and generated ids instead, as after a restore.
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
    /** Takes a request to recompute from its prompt and generated ids ({@link GenerationEngine#resume}). */
    private final BiConsumer<GenerationRequest, int[]> recompute;

    HandoffInbox(RequestChecks checks, RequestResources resources, HandoffExchange exchange,
                 BiConsumer<GenerationRequest, int[]> recompute) {
        this.checks = checks;
        this.resources = resources;
        this.exchange = exchange;
        this.recompute = recompute;
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
        Map<String, PublishedInfo> published;
        try {
            published = exchange.decode(handoff);
        } catch (LentPagesGone e) {
            recompute.accept(withPrompt(request, handoff.prompt()), handoff.generated());
            return;
        }
        try {
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
        } catch (RuntimeException e) {
            release(published);
            throw e;
        }
        incoming.put(request.requestId(), new Incoming(request, handoff, published, System.nanoTime()));
    }

    /** {@code request} with the prompt as the prefill side tokenised it, for a recompute. */
    private static GenerationRequest withPrompt(GenerationRequest r, int[] prompt) {
        return new GenerationRequest(r.requestId(), prompt, null, r.sampling(), r.maxTokens(), r.minTokens(),
                r.stopTokenIds(), r.ignoreEos(), r.priority(), r.constraint(), null, null, r.adapter());
    }

    private static void release(Map<String, PublishedInfo> published) {
        published.values().forEach(PublishedInfo::release);
    }

    /** Imports what fits, in order: the requests now running with their prompt's KV in place. */
    List<LiveRequest> importReady(StepOutputs out) {
        List<LiveRequest> imported = new ArrayList<>();
        for (var it = incoming.values().iterator(); it.hasNext(); ) {
            Incoming in = it.next();
            PrefillHandoff h = in.handoff();
            LiveRequest r = new LiveRequest(in.request(), h.prompt(), h.generated(), in.arrivalNanos());
            resources.open(r);
            HandoffExchange.Retrieval got;
            try {
                got = exchange.retrieve(r.id(), in.published());
            } catch (LentPagesGone e) {
                resources.close(r.id());
                it.remove();
                release(in.published());
                recompute.accept(withPrompt(in.request(), h.prompt()), h.generated());
                continue;
            }
            if (got.outcome().ok() && got.outcome().ready()) {
                it.remove();
                release(in.published());
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
            release(in.published());
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
        Incoming in = incoming.remove(requestId);
        if (in != null) {
            release(in.published());
        }
    }

    void clear() {
        incoming.values().forEach(in -> release(in.published()));
        incoming.clear();
    }
}
