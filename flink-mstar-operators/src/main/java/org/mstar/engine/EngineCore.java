package org.mstar.engine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.DeviceFault;
import org.mstar.model.GenerationConfig;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvShelf;
import org.mstar.resources.lora.AdapterManager;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.KvPoolDType;
import org.mstar.resources.runner.ResourceFactory;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The engine loop over a {@link ModelRunner}, with continuous batching. Each {@link #step()} asks the
 * {@link Scheduler} what to run — offloaded requests to bring back, requests to preempt for a higher-priority one,
 * the rows of the step — then drives admit → plan → forward → sample → commit through the {@link StepRunner} and
 * streams the tokens out.
 *
 * <p>When admission still runs out of KV pages, the scheduler names a victim, which is offloaded to host pages
 * when the cache has a host pool, otherwise freed and later recomputed from its prompt and generated tokens, and
 * the step is planned again; with no victim the step drops its last row, and a request that cannot fit even
 * alone fails with a 400 ({@link AdmitRecovery}).
 *
 * <p>A request with an adapter whose slot is not to be had (every slot holds an adapter of a running request) is left
 * out of the step and waits, as a request whose KV is on its way back from the host does.
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
 * <p>A runner may run a request as a series of sequences ({@link ModelRequest}: Whisper's windows), each started
 * from no KV as a recompute is; the request says what the row feeding a sequence's end yields and when it ends.
 *
 * <p>Disaggregated ({@link EngineOptions#role()}): a prefill engine hands each request off once it sampled its
 * first token ({@link StepResult#handoffs()}); a decode engine takes such hand-offs ({@link #receive}), importing
 * them at the start of a step, in arrival order, when their pages fit.
 */
final class EngineCore implements GenerationEngine {
    private final TextTokenizer tokenizer;
    private final int usablePages;
    private final StepRunner runner;
    private final KVManager kv;
    /** Null when the engine serves no adapters. */
    private final AdapterManager adapters;
    private final RequestResources resources;
    private final RequestChecks checks;
    /** Longest prompt a prefill engine takes: its hand-off's KV must fit one Java array. */
    private final int maxHandoffPrompt;
    private final Scheduler scheduler;
    private final StepBuilder steps;
    private final StepForward forwards;
    private final StepPipeline pipeline;
    private final AdmitRecovery recovery;
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
    private final ModelRunner model;
    /** Whether the KV cache keeps a prefix index to probe: off where the model's KV is not a function of tokens. */
    private final boolean prefixCached;
    private long stepNo;

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType the model's element type: the KV pages', unless the options' cache dtype says otherwise
     */
    EngineCore(ModelRunner model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
               DType kvDType) {
        ModelRunner.ResourceKeys keys = model.keys();
        this.model = model;
        this.tokenizer = tokenizer;
        int pageSize = options.kvCache().pageSize();
        this.usablePages = options.kvCache().maxNumPages() - 1;
        int maxSeqLen = Math.min(options.kvCache().maxSeqLen(), model.maxPositions());
        StopRule stopRule = new StopRule(generation.eosTokenIds(), maxSeqLen);
        List<NodeResourceSpec> specs = model.declareResources(options.kvCache(), generation.eosTokenIds());
        // a cache that keeps only the window holds at most the window, a partial page and one step's tokens
        int window = model.mainCacheWindow();
        int heldPagesBound = window == 0 ? Integer.MAX_VALUE
                : (window + pageSize + options.tokenBudget() + pageSize - 1) / pageSize;
        this.checks = new RequestChecks(model.vocabSize(), maxSeqLen, pageSize, usablePages, heldPagesBound,
                tokenizer);
        this.role = options.role();
        this.maxHandoffPrompt = role == EngineRole.PREFILL ? maxHandoffTokens(model.kvPageBytes(pageSize,
                KvPoolDType.of(options.kvCache().cacheDType(), kvDType)), pageSize) : Integer.MAX_VALUE;
        var built = new ResourceFactory(StandardBuilders.all()).buildAll(specs,
                EngineResourceInfo.singleRank(model.device(), kvDType), Set.of());
        model.bind(built);
        this.runner = new StepRunner(built, Map.of(keys.node(), built.keySet()));
        this.kv = model.kv();
        this.exchange = role == EngineRole.COLOCATED ? null
                : new HandoffExchange(runner, keys, model.handoffCodecs(), kv);
        SamplerResource sampler = model.sampler();
        NodeResourceSpec samplerSpec = specs.stream().filter(s -> s.resourceKey().equals(keys.sampler()))
                .findFirst().orElseThrow();
        NodeResourceSpec adapterSpec = specs.stream().filter(s -> s.resourceKey().equals(keys.adapters()))
                .findFirst().orElse(null);
        this.adapters = adapterSpec == null ? null : (AdapterManager) built.get(keys.adapters());
        this.resources = new RequestResources(runner, keys, kv, sampler, samplerSpec, adapterSpec,
                model.defaultSampling(), stopRule, new Constraints(tokenizer, model.vocabSize(),
                generation.eosTokenIds()), pageSize);
        this.scheduler = new Scheduler(options.maxBatchRows(), options.tokenBudget(), pageSize,
                model.statePages(pageSize), model.prefillChunkEdge(), options.scheduling());
        byte[] prefixRoot = PrefixRoot.of(built.values(), model.identity());
        this.prefixCached = kv.enablePrefixCache(prefixRoot, Set.of(keys.walk()));
        if (prefixCached) {
            // what else keeps state across requests (a recurrent model's state snapshots) opens under the same root
            built.values().stream().filter(r -> r != kv).forEach(r -> r.capability(PrefixCaching.class)
                    .ifPresent(c -> c.enablePrefixCache(prefixRoot, Set.of(keys.walk()))));
        }
        this.graphs = options.decodeGraphs() ? new DecodeGraphs(model, options.maxBatchRows()) : null;
        this.steps = new StepBuilder(model, graphs);
        // a prefill engine hands every request off after its first token: it has no decode steps to plan ahead
        this.preplan = graphs != null && options.preplan() && role != EngineRole.PREFILL
                ? new DecodePreplan(runner, steps, stopRule) : null;
        this.inbox = new HandoffInbox(checks, resources, exchange, this::resume);
        this.isolation = new FaultIsolation(resources);
        this.forwards = new StepForward(model, graphs);
        TokenAcceptor acceptor = new TokenAcceptor(live, counters, resources, stopRule, role, exchange, tokenizer,
                preplan);
        this.pipeline = new StepPipeline(runner, sampler, keys.sampler(), forwards, acceptor, steps, scheduler,
                isolation, inbox, preplan, timings, live, this::remove, options.launchAhead());
        this.recovery = new AdmitRecovery(live, scheduler, resources, pipeline, counters, preplan);
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
        ModelRequest program = model.openRequest(request, generated);
        LiveRequest r = program != null ? new LiveRequest(request, program, System.nanoTime())
                : new LiveRequest(request, checkedPrompt(request, generated), generated, System.nanoTime());
        resources.open(r);
        enter(r);
    }

    /** The prompt of a request that is a prompt followed by generated tokens, checked against the model. */
    private int[] checkedPrompt(GenerationRequest request, int[] generated) {
        int[] prompt = checks.prompt(request);
        checks.check(request, prompt, generated);
        if (prompt.length > maxHandoffPrompt) {
            throw new RequestValidationException("prompt", "has " + prompt.length + " tokens; a prefill engine of this"
                    + " model hands off at most " + maxHandoffPrompt + " (a hand-off's KV must stay under 2 GiB)");
        }
        return prompt;
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
        } else {
            exchange.discard(handoff);
        }
    }

    /** See {@link LlamaEngine#lendOnDevice}. */
    void lendOnDevice(KvShelf shelf) {
        if (exchange == null) {
            throw new UnsupportedOperationException("a colocated engine hands nothing off");
        }
        exchange.lendOnDevice(shelf);
    }

    /** See {@link LlamaEngine#handOffOverNetwork}. */
    void handOffOverNetwork(KvBytesServer server) {
        if (exchange == null) {
            throw new UnsupportedOperationException("a colocated engine hands nothing off");
        }
        exchange.handOffOverNetwork(server);
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
        if (pipeline.inFlight()) {
            pipeline.finish(out, stepNo); // launched by the previous step(), ahead of its accept
            return out.result();
        }
        for (LiveRequest r : inbox.isEmpty() ? List.<LiveRequest>of() : inbox.importReady(out, live.isEmpty())) {
            counters.prefixHitTokens += r.cachedPromptTokens;
            enter(r);
        }
        for (LiveRequest r : scheduler.resumeOrder(live.values())) {
            if (!resources.reload(r)) {
                break; // in order; the rest wait too
            }
        }
        for (LiveRequest r : live.values()) {
            if (prefixCached && r.status == RequestStatus.WAITING && r.computed == 0 && !r.probed) {
                counters.prefixHitTokens += resources.probePrefix(r);
            }
        }
        if (!isolation.active() && scheduler.preemptsForWaiting()) {
            // availablePages walks the evictable prefix pages: asked only where the policy preempts
            recovery.preemptForWaiting(live.values(), kv.availablePages());
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
                    pipeline.launch(step, start);
                } catch (DeviceFault e) {
                    throw e;
                } catch (RuntimeException e) {
                    pipeline.failStep(rows, e, out);
                    return out.result();
                }
                pipeline.finish(out, stepNo);
                return out.result();
            }
            recovery.recover(o.reason(), rows, excluded, out);
        }
    }

    // ---------------------------------------------------------------- state

    @Override
    public boolean hasWork() {
        return pipeline.inFlight() || !live.isEmpty() || !inbox.isEmpty();
    }

    @Override
    public int waiting() {
        return inbox.size() + (int) live.values().stream().filter(r -> r.status == RequestStatus.WAITING).count();
    }

    @Override
    public EngineStats stats() {
        int waiting = waiting();
        return new EngineStats(live.size() - waiting, waiting, usablePages - kv.freePages(), usablePages,
                counters.prefixHitTokens, counters.promptTokens, counters.generatedTokens, counters.preemptions,
                adapters == null ? 0 : adapters.loads(), adapters == null ? 0 : adapters.evictions());
    }

    @Override
    public int maxBatchRows() {
        return scheduler.maxRows();
    }

    // ---------------------------------------------------------------- for the facade (documented there)

    void useChatTemplate(ChatTemplate template) {
        checks.useChatTemplate(template);
    }

    void observeLogits(LogitsObserver observer) {
        forwards.observeWith(observer);
    }

    long launchedAhead() {
        return pipeline.launchedAhead();
    }

    long decodeGraphReplays() {
        return graphs == null ? 0 : graphs.replays();
    }

    StepTimings stepTimings() {
        return timings;
    }

    PreplanCounts preplanCounts() {
        return preplan == null ? PreplanCounts.NONE : preplan.counts();
    }

    Map<Integer, Long> decodeGraphBytes() {
        return graphs == null ? Map.of() : graphs.heldBytes();
    }

    long handoffBytesCopied() {
        return exchange == null ? 0 : exchange.bytesCopied();
    }

    long handoffLentBytesCopied() {
        return exchange == null ? 0 : exchange.lentBytesCopied();
    }

    long reusedDeclarations() {
        return preplan == null ? 0 : preplan.reusedDeclarations();
    }

    StepRunner runner() {
        return runner;
    }

    long adapterPoolBytes() {
        return adapters == null ? 0 : adapters.byteSize();
    }

    String anyAdapter() {
        return adapters == null ? null : adapters.adapters().stream().findFirst().orElse(null);
    }

    @Override
    public void close() {
        RuntimeException failure = pipeline.drain(); // thrown once the rest is freed all the same
        inbox.close();
        new ArrayList<>(live.keySet()).forEach(this::remove);
        if (graphs != null) {
            graphs.close();
        }
        runner.resources().values().forEach(org.mstar.resources.Resource::cleanup);
        if (failure != null) {
            throw failure;
        }
    }
}
