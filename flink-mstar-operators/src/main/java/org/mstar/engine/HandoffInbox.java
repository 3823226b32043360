package org.mstar.engine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
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
 *
 * <p>A hand-off by ticket ({@link HandoffExchange#pullsOverNetwork}) is decoded, its bytes pulled, on a thread of the
 * inbox's own, so the engine's steps for its running requests go on meanwhile; the engine waits for a pull only
 * when it has nothing else to run. Such a hand-off's decoded state is checked when the pull is done, and a broken
 * one then fails its request (500) rather than its arrival.
 */
final class HandoffInbox implements AutoCloseable {
    /** A received hand-off waiting to be imported, with its resources' publications being or already decoded. */
    private static final class Incoming {
        final GenerationRequest request;
        final PrefillHandoff handoff;
        final int promptLength;
        final CompletableFuture<Map<String, PublishedInfo>> published;
        final long arrivalNanos;
        /** Whether the decoded state was checked against the prompt. */
        boolean checked;

        Incoming(GenerationRequest request, PrefillHandoff handoff, int promptLength,
                 CompletableFuture<Map<String, PublishedInfo>> published, long arrivalNanos) {
            this.request = request;
            this.handoff = handoff;
            this.promptLength = promptLength;
            this.published = published;
            this.arrivalNanos = arrivalNanos;
        }
    }

    private final Map<String, Incoming> incoming = new LinkedHashMap<>();
    private final RequestChecks checks;
    private final RequestResources resources;
    /** Null for a colocated engine, which never receives. */
    private final HandoffExchange exchange;
    /** Takes a request to recompute from its prompt and generated ids ({@link GenerationEngine#resume}). */
    private final BiConsumer<GenerationRequest, int[]> recompute;
    /** Decodes hand-offs by ticket; started with the first. */
    private ExecutorService puller;

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
        if (exchange.pullsOverNetwork()) {
            incoming.put(request.requestId(), new Incoming(request, handoff, prompt.length,
                    CompletableFuture.supplyAsync(() -> exchange.decode(handoff), puller()), System.nanoTime()));
            return;
        }
        Map<String, PublishedInfo> published;
        try {
            published = exchange.decode(handoff);
        } catch (LentPagesGone e) {
            recompute.accept(withPrompt(request, handoff.prompt()), handoff.generated());
            return;
        }
        Incoming in = new Incoming(request, handoff, prompt.length, CompletableFuture.completedFuture(published),
                System.nanoTime());
        check(in, published);
        incoming.put(request.requestId(), in);
    }

    private ExecutorService puller() {
        if (puller == null) {
            puller = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "mstar-handoff-pull");
                t.setDaemon(true);
                return t;
            });
        }
        return puller;
    }

    /**
     * Checks that {@code published} stores exactly the prompt, once; gives its pages back when not.
     *
     * @throws IllegalArgumentException when it does not
     */
    private static void check(Incoming in, Map<String, PublishedInfo> published) {
        if (in.checked) {
            return;
        }
        String id = in.request.requestId();
        try {
            int[] stored = published.values().stream().flatMapToInt(PublishedInfo::storedLengths).toArray();
            if (in.handoff.generated().length == 0 || stored.length == 0) {
                throw new IllegalArgumentException("hand-off of '" + id + "' carries "
                        + in.handoff.generated().length + " generated tokens and " + stored.length + " KV streams");
            }
            for (int seqLen : stored) {
                if (seqLen != in.promptLength) {
                    throw new IllegalArgumentException("hand-off of '" + id + "' stores " + seqLen
                            + " tokens of a " + in.promptLength + "-token prompt");
                }
            }
        } catch (RuntimeException e) {
            release(published);
            throw e;
        }
        in.checked = true;
    }

    /** {@code request} with the prompt as the prefill side tokenised it, for a recompute. */
    private static GenerationRequest withPrompt(GenerationRequest r, int[] prompt) {
        return new GenerationRequest(r.requestId(), prompt, null, r.sampling(), r.maxTokens(), r.minTokens(),
                r.stopTokenIds(), r.ignoreEos(), r.priority(), r.constraint(), null, null, r.adapter());
    }

    private static void release(Map<String, PublishedInfo> published) {
        published.values().forEach(PublishedInfo::release);
    }

    /**
     * Imports what fits, in order: the requests now running with their prompt's KV in place. A hand-off whose bytes
     * are still being pulled holds back those behind it; the engine waits for it only when {@code idle}.
     */
    List<LiveRequest> importReady(StepOutputs out, boolean idle) {
        List<LiveRequest> imported = new ArrayList<>();
        for (var it = incoming.values().iterator(); it.hasNext(); ) {
            Incoming in = it.next();
            if (!in.published.isDone() && !(idle && imported.isEmpty())) {
                break;
            }
            Map<String, PublishedInfo> published;
            try {
                published = in.published.join();
                check(in, published);
            } catch (CompletionException | IllegalArgumentException e) {
                it.remove();
                Throwable why = e instanceof CompletionException ? e.getCause() : e;
                if (why instanceof LentPagesGone) {
                    recompute.accept(withPrompt(in.request, in.handoff.prompt()), in.handoff.generated());
                } else {
                    out.failures.add(new RequestFailure(in.request.requestId(), 500, "broken prefill hand-off: "
                            + why.getMessage()));
                }
                continue;
            }
            PrefillHandoff h = in.handoff;
            LiveRequest r = new LiveRequest(in.request, h.prompt(), h.generated(), in.arrivalNanos);
            resources.open(r);
            HandoffExchange.Retrieval got;
            try {
                got = exchange.retrieve(r.id(), published);
            } catch (LentPagesGone e) {
                resources.close(r.id());
                it.remove();
                release(published);
                recompute.accept(withPrompt(in.request, h.prompt()), h.generated());
                continue;
            }
            if (got.outcome().ok() && got.outcome().ready()) {
                it.remove();
                release(published);
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
            release(published);
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
            releaseWhenDecoded(in);
        }
    }

    void clear() {
        incoming.values().forEach(HandoffInbox::releaseWhenDecoded);
        incoming.clear();
    }

    /** Gives back what a dropped hand-off holds, once its decoding (a pull under way) is done. */
    private static void releaseWhenDecoded(Incoming in) {
        in.published.thenAccept(HandoffInbox::release);
    }

    /** Drops what it holds and stops its pulling thread (a pull under way finishes, and its pages are given back). */
    @Override
    public void close() {
        clear();
        if (puller != null) {
            puller.shutdown();
        }
    }
}
