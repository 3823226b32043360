package org.mstar.engine;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.mstar.device.DType;
import org.mstar.device.DeviceFault;
import org.mstar.device.Tensor;
import org.mstar.engine.llama.LlamaRunner;
import org.mstar.model.GenerationConfig;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.AdmitFailedReason;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.RequestOffloading;
import org.mstar.resources.SlotLease;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.KVManagerBuilder;
import org.mstar.resources.runner.ResourceBuilder;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.PendingDraw;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Serves a {@link LlamaModel} with continuous batching. Each {@link #step()} asks the {@link Scheduler} what to
 * run — offloaded requests to bring back, requests to preempt for a higher-priority one, the rows of the step —
 * then drives admit → plan → forward → sample → commit through the {@link StepRunner} and streams the tokens out.
 *
 * <p>When admission still runs out of KV pages, the scheduler names a victim, which is offloaded to host pages
 * when the cache has a host pool, otherwise freed and later recomputed from its prompt and generated tokens, and
 * the step is planned again; with no victim the step drops its last row, and a request that cannot fit even
 * alone fails with a 400.
 *
 * <p>A step that throws (other than a {@link DeviceFault}, which ends the task) fails only the request at fault:
 * the step's requests are reset and recomputed, then run one at a time until the one that throws alone is failed
 * with a 500 and the others carry on, their tokens unchanged.
 *
 * <p>With {@link EngineOptions#decodeGraphs()}, a step of decode rows only is padded to a batch bucket and
 * replayed as a recorded device graph ({@link DecodeGraphs}); with {@link EngineOptions#preplan()} too, the next
 * decode step is planned while the device runs this one ({@link DecodePreplan}), and with
 * {@link EngineOptions#launchAhead()} it is enqueued before this one's tokens are accepted, fed from them on the
 * device: a {@code step()} then returns this step's tokens with the next one in flight. {@link #stepTimings()}
 * splits each step's host time into phases.
 *
 * <p>Disaggregated ({@link EngineOptions#role()}): a prefill engine hands each request off once it sampled its
 * first token ({@link StepResult#handoffs()}); a decode engine takes such hand-offs ({@link #receive}), importing
 * them at the start of a step, in arrival order, when their pages fit.
 */
public final class LlamaEngine implements GenerationEngine {
    private final ModelRunner model;
    private final TextTokenizer tokenizer;
    private final int usablePages;
    private final StepRunner runner;
    private final KVManager kv;
    private final SamplerResource sampler;
    private final StopRule stopRule;
    private final RequestResources resources;
    private final RequestChecks checks;
    /** Longest prompt a prefill engine takes: its hand-off's KV must fit one Java array. */
    private final int maxHandoffPrompt;
    private final Scheduler scheduler;
    private final StepBuilder steps;
    private final EngineCounters counters = new EngineCounters();
    /** Null unless decode graphs are on. */
    private final DecodeGraphs graphs;
    /** Null unless decode graphs and pre-planning are on. */
    private final DecodePreplan preplan;
    private final StepTimings timings = new StepTimings();
    private final EngineRole role;
    /** Null for a colocated engine. */
    private final HandoffExchange exchange;

    private final Map<String, LiveRequest> live = new LinkedHashMap<>();
    private final HandoffInbox inbox;
    private final FaultIsolation isolation;
    private long stepNo;
    /** The step whose tokens are drawn on the device and not yet accepted; null when none. */
    private InFlightStep inFlight;
    private final boolean launchAhead;
    private long launchedAhead;
    private LogitsObserver logitsObserver;
    private final List<AutoCloseable> owned = new ArrayList<>();

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType element type of the KV pages
     */
    public LlamaEngine(LlamaModel model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
                       DType kvDType) {
        this.model = new LlamaRunner(model);
        ModelRunner.ResourceKeys keys = this.model.keys();
        this.tokenizer = tokenizer;
        int pageSize = options.kvCache().pageSize();
        this.usablePages = options.kvCache().maxNumPages() - 1;
        int maxSeqLen = Math.min(options.kvCache().maxSeqLen(), this.model.maxPositions());
        this.stopRule = new StopRule(generation.eosTokenIds(), maxSeqLen);
        List<NodeResourceSpec> specs = this.model.declareResources(options.kvCache(), generation.eosTokenIds());
        // a cache that keeps only the window holds at most the window, a partial page and one step's tokens
        int window = this.model.mainCacheWindow();
        int heldPagesBound = window == 0 ? Integer.MAX_VALUE
                : (window + pageSize + options.tokenBudget() + pageSize - 1) / pageSize;
        this.checks = new RequestChecks(this.model.vocabSize(), maxSeqLen, pageSize, usablePages, heldPagesBound,
                tokenizer);
        this.role = options.role();
        long pageBytes = this.model.kvPageBytes(pageSize, kvDType);
        this.maxHandoffPrompt = role == EngineRole.PREFILL ? maxHandoffTokens(pageBytes, pageSize) : Integer.MAX_VALUE;
        HandoffKvTransport transport = role == EngineRole.COLOCATED ? null : new HandoffKvTransport();
        Map<String, ResourceBuilder> builders = transport == null ? Map.of()
                : Map.of(keys.kv(), new KVManagerBuilder(transport));
        var built = new ResourceFactory().buildAll(specs, EngineResourceInfo.singleRank(this.model.device(), kvDType),
                Set.of(), builders);
        this.model.bind(built);
        this.runner = new StepRunner(built, Map.of(keys.node(), built.keySet()));
        this.exchange = transport == null ? null : new HandoffExchange(runner, keys, transport);
        this.kv = this.model.kv();
        this.sampler = this.model.sampler();
        NodeResourceSpec samplerSpec = specs.stream().filter(s -> s.resourceKey().equals(keys.sampler()))
                .findFirst().orElseThrow();
        this.resources = new RequestResources(runner, keys, kv, sampler, samplerSpec, stopRule,
                new Constraints(tokenizer, this.model.vocabSize(), generation.eosTokenIds()), pageSize);
        this.scheduler = new Scheduler(options.maxBatchRows(), options.tokenBudget(), pageSize, options.scheduling());
        kv.enablePrefixCache(PrefixRoot.of(built.values(), this.model.identity()), Set.of(keys.walk()));
        this.graphs = options.decodeGraphs() ? new DecodeGraphs(this.model, options.maxBatchRows()) : null;
        this.steps = new StepBuilder(this.model, graphs);
        // a prefill engine hands every request off after its first token: it has no decode steps to plan ahead
        this.preplan = graphs != null && options.preplan() && role != EngineRole.PREFILL
                ? new DecodePreplan(runner, steps, stopRule) : null;
        this.launchAhead = options.launchAhead();
        this.inbox = new HandoffInbox(checks, resources, exchange);
        this.isolation = new FaultIsolation(resources);
    }

    // ---------------------------------------------------------------- requests

    @Override
    public void submit(GenerationRequest request) {
        admitRequest(request, new int[0]);
    }

    @Override
    public void resume(GenerationRequest request, int[] generated) {
        admitRequest(request, generated);
    }

    private void admitRequest(GenerationRequest request, int[] generated) {
        if (isLive(request.requestId())) {
            return;
        }
        int[] prompt = checks.prompt(request);
        checks.check(request, prompt, generated);
        if (prompt.length > maxHandoffPrompt) {
            throw new RequestValidationException("prompt", "has " + prompt.length + " tokens; a prefill engine of this"
                    + " model hands off at most " + maxHandoffPrompt + " (a hand-off's KV must stay under 2 GiB)");
        }
        LiveRequest r = new LiveRequest(request, prompt, generated, System.nanoTime());
        resources.open(r);
        enter(r);
    }

    /**
     * Prompt tokens whose KV pages fit under 2 GiB (less room for the payload's header): a hand-off's page
     * contents travel as one array per stream.
     */
    static int maxHandoffTokens(long pageBytes, int pageSize) {
        return (int) Math.min(Integer.MAX_VALUE, (Integer.MAX_VALUE - 1024L) / pageBytes * pageSize);
    }

    private void enter(LiveRequest r) {
        live.put(r.id(), r);
        r.detokenizeWith(tokenizer);
        counters.promptTokens += r.prompt.length;
    }

    private boolean isLive(String requestId) {
        return live.containsKey(requestId) || inbox.contains(requestId);
    }

    @Override
    public void receive(GenerationRequest request, PrefillHandoff handoff) {
        if (role != EngineRole.DECODE) {
            throw new UnsupportedOperationException("a " + role + " engine does not take prefill hand-offs");
        }
        if (!isLive(request.requestId())) {
            inbox.receive(request, handoff);
        }
    }

    @Override
    public void remove(String requestId) {
        inbox.remove(requestId);
        LiveRequest r = live.remove(requestId);
        if (r != null) {
            if (preplan != null) {
                preplan.forget(r);
            }
            isolation.forget(r);
            resources.close(requestId);
        }
    }

    // ---------------------------------------------------------------- step

    @Override
    public StepResult step() {
        if (!hasWork()) {
            return StepResult.EMPTY;
        }
        stepNo++;
        timings.begin();
        StepOutputs out = new StepOutputs();
        if (inFlight != null) {
            finish(out); // launched by the previous step(), ahead of its accept
            return out.result();
        }
        for (LiveRequest r : inbox.isEmpty() ? List.<LiveRequest>of() : inbox.importReady(out)) {
            counters.prefixHitTokens += r.cachedPromptTokens;
            enter(r);
        }
        for (LiveRequest r : scheduler.resumeOrder(live.values())) {
            if (!resources.reload(r)) {
                break; // in order; the rest wait too
            }
        }
        for (LiveRequest r : live.values()) {
            if (r.status == RequestStatus.WAITING && r.computed == 0 && !r.probed) {
                counters.prefixHitTokens += resources.probePrefix(r);
            }
        }
        if (!isolation.active() && scheduler.preemptsForWaiting()) {
            // availablePages walks the evictable prefix pages: asked only where the policy preempts
            scheduler.preemptForWaiting(live.values(), kv.availablePages()).forEach(this::preempt);
        }
        Set<LiveRequest> excluded = isolation.excluded(live.values());
        while (true) {
            List<BatchRow> rows = scheduler.plan(live.values(), excluded, kv::availablePages);
            if (rows.isEmpty()) {
                return out.result();
            }
            PlannedStep step = steps.build(rows, preplan == null ? null : preplan.declared(rows));
            timings.end(StepTimings.Phase.SCHEDULE);
            FullAdmitOutcome o = preplan == null ? runner.admit(step.step()) : preplan.admit(step.step());
            if (o.ok()) {
                long start = System.nanoTime();
                try {
                    runner.plan(step.step());
                    timings.end(StepTimings.Phase.ADMIT_PLAN);
                    inFlight = drawAndCommit(step, forward(step, null), start, r -> true);
                } catch (DeviceFault e) {
                    throw e;
                } catch (RuntimeException e) {
                    failStep(rows, e, out);
                    return out.result();
                }
                finish(out);
                return out.result();
            }
            recover(o.reason(), rows, excluded, out);
        }
    }

    /** A step threw before its tokens were accepted: fail the request at fault, or reset its requests as suspects. */
    private void failStep(List<BatchRow> rows, RuntimeException e, StepOutputs out) {
        if (preplan != null) {
            preplan.drop();
        }
        List<LiveRequest> involved = rows.stream().map(BatchRow::request).filter(r -> live.get(r.id()) == r).toList();
        fail(isolation.threw(involved), 500, "serving this request failed: " + e, out);
    }

    /** Make room after a refused admit, so that planning again makes progress. */
    private void recover(AdmitFailedReason reason, List<BatchRow> rows, Set<LiveRequest> excluded, StepOutputs out) {
        if (reason instanceof AdmitRuntimeError err) {
            List<String> ids = err.requestIds().isEmpty() ? rows.stream().map(b -> b.request().id()).toList()
                    : List.copyOf(err.requestIds());
            ids.forEach(rid -> fail(live.get(rid), 500, err.message(), out));
        } else if (reason instanceof RequestOffloading ro) {
            rows.stream().filter(b -> b.request().id().equals(ro.requestId())).forEach(b -> excluded.add(b.request()));
        } else if (reason instanceof AllocationFailed af) {
            LiveRequest victim = scheduler.victim(live.values(), rows, af.requestId());
            if (victim != null) {
                preempt(victim);
            } else if (rows.size() > 1) {
                excluded.add(rows.get(rows.size() - 1).request());
            } else {
                fail(rows.get(0).request(), 400,
                        "request needs more KV pages than the engine can give it (" + af.message() + ")", out);
            }
        } else {
            rows.forEach(b -> excluded.add(b.request()));
        }
    }

    private void preempt(LiveRequest victim) {
        if (preplan != null) {
            preplan.forget(victim);
        }
        counters.preemptions++;
        resources.preempt(victim);
    }

    /**
     * Enqueues {@code p}'s forward (planned): its tokens from the host, or, for a step launched ahead, copied on the
     * device from {@code feed}'s draw. Returns the logits of its sampled rows; an eager step's are the caller's to
     * close.
     */
    private Tensor forward(PlannedStep p, InFlightStep feed) {
        SlotLease lease = p.step().ctx().slotLease();
        if (lease == null) {
            try (Tensor ids = model.device().fromInts(p.tokens(), p.tokenCount())) {
                return model.forward(ids, p.sampleRows());
            }
        }
        int bs = lease.bucket().bs();
        // every row samples, real rows first: the bucket's leading logits rows are the real ones
        Tensor logits = feed == null ? graphs.forward(bs, p.tokens())
                : graphs.forward(bs, feed.draw().onDevice(), fedRows(p, feed.step()));
        return logits.rows(0, p.sampleRids().size());
    }

    /**
     * For each row of {@code next}, the row of {@code fed}'s draw holding the token it feeds. The staged rows keep
     * the order of the rows they were staged from, so one pass over both finds them.
     */
    private static int[] fedRows(PlannedStep next, PlannedStep fed) {
        List<String> drawn = fed.sampleRids();
        int[] from = new int[next.rows().size()];
        int j = 0;
        for (int i = 0; i < from.length; i++) {
            String id = next.rows().get(i).request().id();
            while (!drawn.get(j).equals(id)) {
                j++;
            }
            from[i] = j++;
        }
        return from;
    }

    /**
     * With {@code p}'s forward enqueued: enqueue its draw, commit what the forward consumed (all but the sampler,
     * which waits for the tokens) and, after a decode-graph step, plan the next one (of the requests {@code staying})
     * while the device runs this one.
     */
    private InFlightStep drawAndCommit(PlannedStep p, Tensor logits, long start, Predicate<LiveRequest> staying) {
        PendingDraw draw;
        try {
            if (logitsObserver != null) {
                observe(p.sampleRids(), logits);
            }
            draw = sampler.launchSample(p.sampleRids(), logits);
        } finally {
            if (p.step().ctx().slotLease() == null) {
                logits.close(); // the device frees in stream order, after the draw has read them
            }
        }
        timings.end(StepTimings.Phase.LAUNCH);
        runner.commit(p.step(), key -> !key.equals(model.keys().sampler()));
        timings.end(StepTimings.Phase.COMMIT);
        if (preplan != null && p.step().ctx().slotLease() != null) {
            preplan.stage(p.rows(), r -> live.get(r.id()) == r && staying.test(r));
        }
        timings.end(StepTimings.Phase.PREPLAN);
        return new InFlightStep(p, draw, start);
    }

    /**
     * Accept the in-flight step's tokens. When nothing but those tokens can change the next step (it is staged),
     * launch the next step first, so the device runs it while the host accepts; it is then the one in flight.
     */
    private void finish(StepOutputs out) {
        InFlightStep f = inFlight;
        inFlight = null;
        PlannedStep ahead = launchableAhead(f);
        Tensor aheadLogits = null;
        RuntimeException aheadFault = null;
        if (ahead != null) {
            try {
                aheadLogits = launchAhead(ahead, f);
            } catch (DeviceFault e) {
                throw e;
            } catch (RuntimeException e) {
                aheadFault = e;
            }
        }
        Set<String> done = new LinkedHashSet<>();
        long drawnAt;
        try {
            int[] drawn = f.draw().tokens();
            // the device moves on to the step launched ahead now: its cost runs from here
            drawnAt = System.nanoTime();
            f.draw().close();
            timings.end(StepTimings.Phase.WAIT);
            runner.commit(f.step().step(), model.keys().sampler()::equals);
            acceptRows(f.step(), drawn, out, done);
        } catch (DeviceFault e) {
            throw e;
        } catch (RuntimeException e) {
            // the step launched ahead holds only requests of this one, which the isolation resets
            done.forEach(this::remove);
            failStep(f.step().rows(), e, out);
            return;
        }
        timings.end(StepTimings.Phase.ACCEPT);
        scheduler.observeStep(f.step().tokenCount(), System.nanoTime() - f.launchedNanos());
        isolation.ran(f.step().rows());
        timings.stepRan();
        if (aheadLogits != null) {
            try {
                inFlight = drawAndCommit(ahead, aheadLogits, drawnAt, r -> !done.contains(r.id()));
            } catch (DeviceFault e) {
                throw e;
            } catch (RuntimeException e) {
                aheadFault = e;
            }
        }
        // requests that stopped at f's token leave once the step launched ahead committed their rows (its draw
        // drops them)
        done.forEach(this::remove);
        if (aheadFault != null) {
            failStep(ahead.rows(), aheadFault, out);
        }
    }

    /**
     * The staged step, to launch before {@code f} is accepted when only its tokens can change it — the requests
     * outside f's rows (waiting, offloaded) cannot take a row — else null.
     */
    private PlannedStep launchableAhead(InFlightStep f) {
        if (!launchAhead || preplan == null || !inbox.isEmpty() || isolation.active()) {
            return null;
        }
        // a staged request that was removed or preempted since dropped the stage (DecodePreplan.forget)
        List<BatchRow> rows = preplan.stagedRows();
        if (rows.isEmpty() || !scheduler.plansExactly(live.values(), f.requests(), rows)) {
            return null;
        }
        return steps.buildFedOnDevice(rows, preplan.declared(rows));
    }

    /** Admit and plan {@code p} (the staged step: promoted) and enqueue its forward fed from {@code f}'s draw. */
    private Tensor launchAhead(PlannedStep p, InFlightStep f) {
        FullAdmitOutcome o = preplan.admit(p.step());
        if (!o.ok()) {
            throw new IllegalStateException("the staged step was refused at its admit: " + o.reason());
        }
        runner.plan(p.step());
        timings.end(StepTimings.Phase.ADMIT_PLAN);
        Tensor logits = forward(p, f);
        timings.end(StepTimings.Phase.LAUNCH);
        launchedAhead++;
        return logits;
    }

    /** Accept each row's token; requests that finish go to {@code done} (removed by the caller). */
    private void acceptRows(PlannedStep p, int[] drawn, StepOutputs out, Set<String> done) {
        long now = System.nanoTime();
        int s = 0;
        for (BatchRow row : p.rows()) {
            LiveRequest r = row.request();
            if (live.get(r.id()) != r) {
                s += row.samples() ? 1 : 0; // removed since its step launched
                continue;
            }
            if (r.status == RequestStatus.WAITING) {
                r.status = RequestStatus.RUNNING;
                if (r.firstScheduledNanos < 0) {
                    r.firstScheduledNanos = now;
                }
            }
            r.promptTracked = true;
            r.computed += row.span();
            r.lastActiveStep = stepNo;
            if (row.samples() && accept(r, drawn[s++], now, out)) {
                done.add(r.id());
            }
        }
    }

    /** Whether {@code r} is done after {@code token} (finished, or handed off by a prefill engine). */
    private boolean accept(LiveRequest r, int token, long now, StepOutputs out) {
        r.generated.add(token);
        counters.generatedTokens++;
        r.recordToken(now);
        resources.extendPrefix(r, token);
        FinishReason finish = stopRule.check(r, token);
        if (finish == null && resources.constraintComplete(r)) {
            finish = FinishReason.STOP; // structured output complete: nothing else may follow
        }
        out.tokens.add(r.output(token, finish));
        if (finish == null && role == EngineRole.PREFILL) {
            out.handoffs.add(exchange.publish(r));
            return true;
        } else if (finish != null) {
            out.finished.add(r.finished(finish, tokenizer));
            return true;
        }
        return false;
    }

    private void fail(LiveRequest r, int code, String message, StepOutputs out) {
        if (r != null) {
            out.failures.add(new RequestFailure(r.id(), code, message));
            remove(r.id());
        }
    }

    // ---------------------------------------------------------------- state

    @Override
    public boolean hasWork() {
        return inFlight != null || !live.isEmpty() || !inbox.isEmpty();
    }

    @Override
    public int waiting() {
        return inbox.size() + (int) live.values().stream().filter(r -> r.status == RequestStatus.WAITING).count();
    }

    @Override
    public EngineStats stats() {
        int waiting = waiting();
        return new EngineStats(live.size() - waiting, waiting, usablePages - kv.freePages(), usablePages,
                counters.prefixHitTokens, counters.promptTokens, counters.generatedTokens, counters.preemptions);
    }

    @Override
    public int maxBatchRows() {
        return scheduler.maxRows();
    }

    private void observe(List<String> rids, Tensor logits) {
        float[] all = model.device().toFloats(logits);
        int vocab = model.vocabSize();
        for (int i = 0; i < rids.size(); i++) {
            LiveRequest r = live.get(rids.get(i));
            logitsObserver.onLogits(r.id(), r.generated.size(), java.util.Arrays.copyOfRange(all, i * vocab, (i + 1) * vocab));
        }
    }

    /**
     * For checks and harnesses: {@code observer} sees the logits of every sampled row before it is drawn
     * (null removes it). While one is set each step copies its logits to the host, so serving leaves it unset.
     */
    /** Render the messages of requests that send a conversation with {@code template} (the model folder's). */
    public void useChatTemplate(ChatTemplate template) {
        checks.useChatTemplate(template);
    }

    public void observeLogits(LogitsObserver observer) {
        this.logitsObserver = observer;
    }

    /** For checks and harnesses: decode steps launched before the step before them was accepted. */
    public long launchedAhead() {
        return launchedAhead;
    }

    /** For checks and harnesses: decode steps run as graph replays (0 without decode graphs). */
    public long decodeGraphReplays() {
        return graphs == null ? 0 : graphs.replays();
    }

    /** For harnesses: host time per step by phase. */
    public StepTimings stepTimings() {
        return timings;
    }

    /** For checks and harnesses: decode steps planned ahead, and how many were promoted or dropped. */
    public PreplanCounts preplanCounts() {
        return preplan == null ? PreplanCounts.NONE : preplan.counts();
    }

    /** For harnesses: per recorded decode bucket, the device bytes its graph keeps allocated (empty without graphs). */
    public Map<Integer, Long> decodeGraphBytes() {
        return graphs == null ? Map.of() : graphs.heldBytes();
    }

    /** Page bytes this (decode) engine copied from prefill hand-offs; 0 for a colocated one. */
    public long handoffBytesCopied() {
        return exchange == null ? 0 : exchange.bytesCopied();
    }

    /** For tests: steps that reused the pre-planned step's declaration (0 without pre-planning). */
    long reusedDeclarations() {
        return preplan == null ? 0 : preplan.reusedDeclarations();
    }

    /** The runner, for tests that check resource invariants. */
    StepRunner runner() {
        return runner;
    }

    @Override
    public void close() {
        RuntimeException failure = null;
        if (inFlight != null) {
            try {
                inFlight.draw().tokens(); // nothing is freed while the device may still use it
            } catch (RuntimeException e) {
                failure = e; // e.g. the device failed: free the rest all the same
            }
            inFlight.draw().close();
            inFlight = null;
        }
        inbox.clear();
        new ArrayList<>(live.keySet()).forEach(this::remove);
        if (graphs != null) {
            graphs.close();
        }
        runner.resources().values().forEach(org.mstar.resources.Resource::cleanup);
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception e) {
                IllegalStateException closing = new IllegalStateException("closing " + c, e);
                if (failure != null) {
                    closing.addSuppressed(failure);
                }
                throw closing;
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** Close {@code resource} with this engine (the model and tokenizer a loader made for it). */
    void own(AutoCloseable resource) {
        owned.add(resource);
    }
}
