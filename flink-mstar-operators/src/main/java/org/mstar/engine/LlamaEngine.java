package org.mstar.engine;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.model.GenerationConfig;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.tokenizer.IncrementalDetokenizer;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.AdmitFailedReason;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.PrefixKeys;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Serves a {@link LlamaModel} with continuous batching: each {@link #step()} schedules running decodes
 * first, then prefill chunks under the token budget (probing the prefix cache for new prompts), drives
 * admit → plan → forward → sample → commit through the {@link StepRunner}, and streams the tokens out.
 *
 * <p>When admission runs out of KV pages, the least recently active request outside the batch is
 * preempted — offloaded to host pages when the cache has a host pool, otherwise freed and later
 * recomputed from its prompt and generated tokens — and the step is retried; with no victim the batch
 * shrinks, and a request that cannot fit even alone fails with a 400.
 *
 * <p>With {@link EngineOptions#decodeGraphs()}, a step of decode rows only is padded to a batch bucket
 * and replayed as a recorded device graph ({@link DecodeGraphs}); padding rows are declared in the step
 * (real ids first in {@code ctx.paddedRequestIds()}), and the resources route, address and commit
 * nothing for them.
 */
public final class LlamaEngine implements GenerationEngine {
    private static final String OUT = "new_token";

    private final LlamaModel model;
    private final TextTokenizer tokenizer;
    private final EngineOptions options;
    private final StepRunner runner;
    private final KVManager kv;
    private final SamplerResource sampler;
    private final NodeResourceSpec samplerSpec;
    private final StopRule stopRule;
    private final BatchPlanner planner;
    private final EngineCounters counters = new EngineCounters();
    /** Null unless decode graphs are on. */
    private final DecodeGraphs graphs;

    private final Map<String, LiveRequest> live = new LinkedHashMap<>();
    private final Deque<LiveRequest> waiting = new ArrayDeque<>();
    private long stepNo;
    private LogitsObserver logitsObserver;
    private final List<AutoCloseable> owned = new ArrayList<>();

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType element type of the KV pages
     */
    public LlamaEngine(LlamaModel model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
                       DType kvDType) {
        this.model = model;
        this.tokenizer = tokenizer;
        this.options = options;
        int maxSeqLen = Math.min(options.kvCache().maxSeqLen(), model.config().maxPositionEmbeddings());
        this.stopRule = new StopRule(generation.eosTokenIds(), maxSeqLen);
        List<NodeResourceSpec> specs = model.declareResources(options.kvCache(), generation.eosTokenIds());
        var built = new ResourceFactory().buildAll(specs, EngineResourceInfo.singleRank(model.device(), kvDType), Set.of());
        model.bind(built);
        this.runner = new StepRunner(built, Map.of(LlamaModel.NODE, built.keySet()));
        this.kv = model.resources().kv();
        this.sampler = model.resources().sampler();
        this.samplerSpec = specs.stream().filter(s -> s.resourceKey().equals(LlamaModel.SAMPLER)).findFirst().orElseThrow();
        this.planner = new BatchPlanner(options.maxBatchRows(), options.tokenBudget());
        kv.enablePrefixCache(PrefixRoot.of(built.values(), model), Set.of(LlamaModel.WALK));
        this.graphs = options.decodeGraphs() ? new DecodeGraphs(model, options.maxBatchRows()) : null;
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
        if (live.containsKey(request.requestId())) {
            return;
        }
        int[] prompt = tokenize(request);
        checkFits(request, prompt, generated);
        LiveRequest r = new LiveRequest(request, prompt, generated, System.nanoTime());
        ingest(r);
        if (generated.length > 0) {
            sampler.restore(r.id(), prompt, generated);
            r.promptTracked = true;
        }
        live.put(r.id(), r);
        waiting.addLast(r);
        if (tokenizer != null) {
            IncrementalDetokenizer d = tokenizer.detokenizer(prompt);
            for (int t : generated) {
                d.push(t);
            }
            r.detokenizer = d;
        }
        counters.promptTokens += prompt.length;
    }

    private int[] tokenize(GenerationRequest request) {
        int[] ids = request.promptTokenIds();
        if (ids == null) {
            if (request.promptText() == null) {
                throw new RequestValidationException("prompt", "either prompt text or prompt token ids is required");
            }
            if (tokenizer == null) {
                throw new RequestValidationException("prompt", "this model has no tokenizer; send token ids");
            }
            ids = tokenizer.encode(request.promptText());
        }
        if (ids.length == 0) {
            throw new RequestValidationException("prompt", "must not be empty");
        }
        int vocab = model.config().vocabSize();
        for (int id : ids) {
            if (id < 0 || id >= vocab) {
                throw new RequestValidationException("prompt_token_ids", "token id " + id + " outside the vocabulary of " + vocab);
            }
        }
        return ids;
    }

    private void checkFits(GenerationRequest request, int[] prompt, int[] generated) {
        if (request.maxTokens() < 1) {
            throw new RequestValidationException("max_tokens", "must be >= 1, got " + request.maxTokens());
        }
        if (request.minTokens() < 0 || request.minTokens() > request.maxTokens()) {
            throw new RequestValidationException("min_tokens", "must be in [0, max_tokens], got " + request.minTokens());
        }
        int maxSeqLen = Math.min(options.kvCache().maxSeqLen(), model.config().maxPositionEmbeddings());
        if (prompt.length >= maxSeqLen) {
            throw new RequestValidationException("prompt", "has " + prompt.length + " tokens; this model serves at most "
                    + (maxSeqLen - 1) + " prompt tokens");
        }
        int pageSize = options.kvCache().pageSize();
        int worstPages = (Math.min(maxSeqLen, prompt.length + request.maxTokens()) + pageSize - 1) / pageSize;
        if (worstPages > options.kvCache().maxNumPages() - 1) {
            throw new RequestValidationException("max_tokens", "prompt + max_tokens needs " + worstPages
                    + " KV pages; this engine has " + (options.kvCache().maxNumPages() - 1));
        }
        if (generated.length > request.maxTokens()) {
            throw new IllegalArgumentException("resumed request '" + request.requestId() + "' has " + generated.length
                    + " generated tokens, more than max_tokens " + request.maxTokens());
        }
    }

    /** Open the request on every resource: prefix keys of its prompt pages, sampling config, stop ids. */
    private void ingest(LiveRequest r) {
        SamplingReqConfig sampling = r.request.sampling() == null ? SamplingReqConfig.DEFAULTS : r.request.sampling();
        sampling.validate(samplerSpec);
        int pageSize = options.kvCache().pageSize();
        int whole = r.prompt.length / pageSize * pageSize;
        KVReqConfig kvCfg = new KVReqConfig(null, null, null, null, null,
                Map.of(Segment.MAIN, PrefixKeys.chain(r.prompt, pageSize)),
                Map.of(Segment.MAIN, java.util.Arrays.copyOfRange(r.prompt, whole, r.prompt.length)),
                Map.of(Segment.MAIN, OUT), true, null, null);
        Map<String, ResourceReqConfig> overrides = Map.of(LlamaModel.KV, kvCfg, LlamaModel.SAMPLER, sampling);
        runner.ingestRequest(r.id(), overrides);
        sampler.setStopIds(r.id(), stopRule.stopIds(r.request));
    }

    @Override
    public void remove(String requestId) {
        LiveRequest r = live.remove(requestId);
        if (r != null) {
            waiting.remove(r);
            forget(r.id());
        }
    }

    private void forget(String rid) {
        runner.removeRequest(rid);
    }

    // ---------------------------------------------------------------- step

    @Override
    public StepResult step() {
        if (live.isEmpty()) {
            return StepResult.EMPTY;
        }
        stepNo++;
        StepOutputs out = new StepOutputs();
        reloadOffloaded();
        probePrefixes();
        Set<LiveRequest> excluded = new HashSet<>();
        for (LiveRequest r : live.values()) {
            if (r.status == RequestStatus.OFFLOADED) {
                excluded.add(r);
            }
        }
        while (true) {
            List<BatchRow> rows = planner.plan(running(), waiting, excluded);
            if (rows.isEmpty()) {
                return out.result();
            }
            SubmoduleStep step = declare(rows);
            FullAdmitOutcome o = runner.admit(step);
            if (o.ok()) {
                run(rows, step, out);
                return out.result();
            }
            if (!recover(o.reason(), rows, excluded, out)) {
                return out.result();
            }
        }
    }

    private List<LiveRequest> running() {
        List<LiveRequest> rs = new ArrayList<>();
        for (LiveRequest r : live.values()) {
            if (r.status == RequestStatus.RUNNING) {
                rs.add(r);
            }
        }
        return rs;
    }

    private void reloadOffloaded() {
        for (LiveRequest r : live.values()) {
            if (r.status == RequestStatus.OFFLOADED) {
                if (!kv.reload(r.id())) {
                    return; // oldest first; the rest wait too
                }
                r.status = RequestStatus.RUNNING;
            }
        }
    }

    /** Ask the prefix cache how much of each new prompt it holds; the walk then skips that many tokens. */
    private void probePrefixes() {
        for (LiveRequest r : waiting) {
            if (r.computed == 0 && !r.probed) {
                r.probed = true;
                Map<String, int[]> inputs = Map.of(OUT, r.prompt);
                CachedPrefix prefix = runner.resolveCachedPrefix(r.id(), LlamaModel.NODE, LlamaModel.WALK, inputs);
                runner.applyCachedPrefix(r.id(), LlamaModel.NODE, LlamaModel.WALK, inputs, prefix);
                if (prefix != null) {
                    r.computed = prefix.tokens();
                    r.cachedPromptTokens = prefix.tokens();
                    counters.prefixHitTokens += prefix.tokens();
                }
            }
        }
    }

    private SubmoduleStep declare(List<BatchRow> rows) {
        List<Segment> segments = new ArrayList<>(rows.size());
        Map<String, int[]> prompts = new HashMap<>();
        Set<String> sampled = new HashSet<>();
        List<String> rids = new ArrayList<>(rows.size());
        for (BatchRow row : rows) {
            segments.add(new Segment(row.request().id(), Segment.MAIN, row.span()));
            rids.add(row.request().id());
            if (!row.request().promptTracked) {
                prompts.put(row.request().id(), row.request().prompt);
            }
            if (row.samples()) {
                sampled.add(row.request().id());
            }
        }
        int bucket = decodeBucket(rows);
        List<String> padded = new ArrayList<>(rids);
        for (int i = rows.size(); i < bucket; i++) {
            String pad = Integer.toString(rows.size() - i - 1); // padding rids are negative integers
            segments.add(new Segment(pad, Segment.MAIN, 1));
            padded.add(pad);
        }
        SubmoduleStep step = model.declareStep(segments, prompts, sampled);
        StepContext ctx = new StepContext(rids, LlamaModel.WALK, 0, false);
        if (bucket > 0) {
            ctx.setPaddedRequestIds(padded);
            ctx.setSlotLease(DecodeGraphs.lease(bucket));
        }
        step.setCtx(ctx);
        return step;
    }

    /** The graph bucket of a batch of single-token sampling rows; 0 when the step runs eagerly. */
    private int decodeBucket(List<BatchRow> rows) {
        if (graphs == null || rows.stream().anyMatch(r -> r.span() != 1 || !r.samples())) {
            return 0;
        }
        return graphs.bucketFor(rows.size());
    }

    /**
     * Make room after a refused admit. Returns false when the step should end without running.
     */
    private boolean recover(AdmitFailedReason reason, List<BatchRow> rows, Set<LiveRequest> excluded, StepOutputs out) {
        if (reason instanceof AdmitRuntimeError err) {
            for (String rid : err.requestIds().isEmpty() ? rowIds(rows) : err.requestIds()) {
                fail(live.get(rid), 500, err.message(), out);
            }
            return true;
        }
        if (!(reason instanceof AllocationFailed af)) {
            // RequestOffloading: that request sits this step out
            rows.stream().filter(b -> reasonNames(reason, b)).forEach(b -> excluded.add(b.request()));
            return true;
        }
        LiveRequest victim = pickVictim(rows, af.requestId());
        if (victim != null) {
            preempt(victim);
            return true;
        }
        if (rows.size() > 1) {
            excluded.add(rows.get(rows.size() - 1).request());
            return true;
        }
        LiveRequest alone = rows.get(0).request();
        fail(alone, 400, "request needs more KV pages than the engine can give it (" + af.message() + ")", out);
        return true;
    }

    private static boolean reasonNames(AdmitFailedReason reason, BatchRow row) {
        return reason instanceof org.mstar.resources.RequestOffloading ro && ro.requestId().equals(row.request().id());
    }

    private static Set<String> rowIds(List<BatchRow> rows) {
        Set<String> ids = new HashSet<>();
        rows.forEach(r -> ids.add(r.request().id()));
        return ids;
    }

    /** LRU among requests holding pages, preferring those outside the batch, never the one that ran short. */
    private LiveRequest pickVictim(List<BatchRow> rows, String shortRequest) {
        Set<String> inBatch = rowIds(rows);
        LiveRequest best = null;
        for (LiveRequest r : live.values()) {
            if (r.status != RequestStatus.RUNNING || r.computed == 0 || r.id().equals(shortRequest)) {
                continue;
            }
            if (best == null || better(r, best, inBatch)) {
                best = r;
            }
        }
        // a victim inside the batch only when the request that ran short is older (FCFS fairness)
        if (best != null && inBatch.contains(best.id())) {
            LiveRequest shortR = live.get(shortRequest);
            if (shortR == null || shortR.arrivalNanos > best.arrivalNanos) {
                return null;
            }
        }
        return best;
    }

    private static boolean better(LiveRequest a, LiveRequest b, Set<String> inBatch) {
        boolean aIn = inBatch.contains(a.id());
        boolean bIn = inBatch.contains(b.id());
        if (aIn != bIn) {
            return !aIn;
        }
        if (aIn) {
            return a.arrivalNanos > b.arrivalNanos; // newest in the batch goes first
        }
        return a.lastActiveStep < b.lastActiveStep;
    }

    private void preempt(LiveRequest victim) {
        counters.preemptions++;
        if (kv.supportsEviction() && kv.offload(victim.id()) > 0) {
            victim.status = RequestStatus.OFFLOADED;
            return;
        }
        // free and recompute later from prompt + generated tokens, with the same random stream
        runner.removeRequest(victim.id());
        victim.dropKv();
        victim.cachedPromptTokens = 0;
        ingest(victim);
        sampler.restore(victim.id(), victim.prompt, victim.generated.toArray());
        victim.promptTracked = true;
        waiting.addFirst(victim);
    }

    private void run(List<BatchRow> rows, SubmoduleStep step, StepOutputs out) {
        runner.plan(step);
        int total = rows.stream().mapToInt(BatchRow::span).sum();
        int[] tokens = new int[total];
        List<Integer> sampleRows = new ArrayList<>();
        List<String> sampleRids = new ArrayList<>();
        int at = 0;
        for (int i = 0; i < rows.size(); i++) {
            BatchRow row = rows.get(i);
            System.arraycopy(row.tokens(), 0, tokens, at, row.span());
            at += row.span();
            if (row.samples()) {
                sampleRows.add(i);
                sampleRids.add(row.request().id());
            }
        }
        int[] drawn;
        SlotLease lease = step.ctx().slotLease();
        if (lease != null) {
            // every row samples, real rows first: the bucket's leading logits rows are the real ones
            drawn = sample(sampleRids, graphs.forward(lease.bucket().bs(), tokens).rows(0, sampleRids.size()));
        } else {
            try (Tensor ids = model.device().fromInts(tokens, total);
                 Tensor logits = model.forward(ids, sampleRows.stream().mapToInt(Integer::intValue).toArray())) {
                drawn = sample(sampleRids, logits);
            }
        }
        runner.commit(step);
        long now = System.nanoTime();
        int s = 0;
        for (BatchRow row : rows) {
            LiveRequest r = row.request();
            if (r.status == RequestStatus.WAITING) {
                waiting.remove(r);
                r.status = RequestStatus.RUNNING;
                if (r.firstScheduledNanos < 0) {
                    r.firstScheduledNanos = now;
                }
            }
            r.promptTracked = true;
            r.computed += row.span();
            r.lastActiveStep = stepNo;
            if (row.samples()) {
                accept(r, drawn[s++], now, out);
            }
        }
    }

    private int[] sample(List<String> rids, Tensor logits) {
        if (logitsObserver != null) {
            observe(rids, logits);
        }
        return sampler.sample(rids, logits);
    }

    private void accept(LiveRequest r, int token, long now, StepOutputs out) {
        r.generated.add(token);
        counters.generatedTokens++;
        if (r.firstTokenNanos < 0) {
            r.firstTokenNanos = now;
        } else {
            r.interTokenNanosSum += now - r.lastTokenNanos;
            r.tokensTimed++;
        }
        r.lastTokenNanos = now;
        runner.extendPrefixChains(r.id(), LlamaModel.NODE, LlamaModel.WALK, Map.of(OUT, new int[] {token}));
        FinishReason finish = stopRule.check(r, token);
        IncrementalDetokenizer d = r.detokenizer;
        String delta = d == null ? "" : d.push(token);
        if (finish != null && d != null) {
            delta += d.finish();
        }
        out.tokens.add(new TokenOutput(r.id(), r.generated.size() - 1, token, delta, finish));
        if (finish != null) {
            out.finished.add(finished(r, finish));
            live.remove(r.id());
            forget(r.id());
        }
    }

    private FinishedRequest finished(LiveRequest r, FinishReason finish) {
        int[] ids = r.generated.toArray();
        String text = tokenizer == null ? "" : tokenizer.decode(ids);
        long queue = r.firstScheduledNanos < 0 ? 0 : r.firstScheduledNanos - r.arrivalNanos;
        long ttft = r.firstTokenNanos < 0 ? 0 : r.firstTokenNanos - r.arrivalNanos;
        long itl = r.tokensTimed == 0 ? 0 : r.interTokenNanosSum / r.tokensTimed;
        return new FinishedRequest(r.id(), ids, text, finish, r.prompt.length, r.cachedPromptTokens,
                new RequestTimings(queue, ttft, itl, r.lastTokenNanos - r.arrivalNanos));
    }

    private void fail(LiveRequest r, int code, String message, StepOutputs out) {
        if (r == null) {
            return;
        }
        out.failures.add(new RequestFailure(r.id(), code, message));
        live.remove(r.id());
        waiting.remove(r);
        forget(r.id());
    }

    // ---------------------------------------------------------------- state

    @Override
    public boolean hasWork() {
        return !live.isEmpty();
    }

    @Override
    public int waiting() {
        return waiting.size();
    }

    @Override
    public EngineStats stats() {
        int total = options.kvCache().maxNumPages() - 1;
        return new EngineStats(live.size() - waiting.size(), waiting.size(), total - kv.freePages(), total,
                counters.prefixHitTokens, counters.promptTokens, counters.generatedTokens, counters.preemptions);
    }

    private void observe(List<String> rids, Tensor logits) {
        float[] all = model.device().toFloats(logits);
        int vocab = model.config().vocabSize();
        for (int i = 0; i < rids.size(); i++) {
            LiveRequest r = live.get(rids.get(i));
            logitsObserver.onLogits(r.id(), r.generated.size(), java.util.Arrays.copyOfRange(all, i * vocab, (i + 1) * vocab));
        }
    }

    /**
     * For checks and harnesses: {@code observer} sees the logits of every sampled row before it is drawn
     * (null removes it). While one is set each step copies its logits to the host, so serving leaves it unset.
     */
    public void observeLogits(LogitsObserver observer) {
        this.logitsObserver = observer;
    }

    /** For checks and harnesses: decode steps run as graph replays (0 without decode graphs). */
    public long decodeGraphReplays() {
        return graphs == null ? 0 : graphs.replays();
    }

    /** The runner, for tests that check resource invariants. */
    StepRunner runner() {
        return runner;
    }

    @Override
    public void close() {
        for (String rid : new ArrayList<>(live.keySet())) {
            remove(rid);
        }
        if (graphs != null) {
            graphs.close();
        }
        runner.resources().values().forEach(org.mstar.resources.Resource::cleanup);
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception e) {
                throw new IllegalStateException("closing " + c, e);
            }
        }
    }

    /** Close {@code resource} with this engine (the model and tokenizer a loader made for it). */
    void own(AutoCloseable resource) {
        owned.add(resource);
    }

    /** What one step collects before it is returned. */
    private static final class StepOutputs {
        final List<TokenOutput> tokens = new ArrayList<>();
        final List<FinishedRequest> finished = new ArrayList<>();
        final List<RequestFailure> failures = new ArrayList<>();

        StepResult result() {
            return new StepResult(tokens, finished, failures);
        }
    }

    /** Monotonic counters behind {@link EngineStats}. */
    private static final class EngineCounters {
        long prefixHitTokens;
        long promptTokens;
        long generatedTokens;
        long preemptions;
    }
}
