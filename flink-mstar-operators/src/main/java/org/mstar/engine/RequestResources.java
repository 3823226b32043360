package org.mstar.engine;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.AdapterReqConfig;
import org.mstar.resources.AdapterSpec;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.Offload;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.constraint.TokenAutomaton;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.PrefixKeys;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.SamplerResource;

/**
 * A request's presence on every resource of the engine: opened (prefix keys of its prompt pages, sampling
 * config, stop ids, its adapter, and the random stream where it already generated), asked about cached prefixes,
 * preempted (offloaded, or freed for a recompute) and closed. A request with an adapter keys its pages under a seed
 * of the adapter's name and weights, so that no two adapters, nor an adapter and the base model, share KV.
 */
final class RequestResources {
    /** The walk's output the prefix chain follows. */
    static final String OUT = "new_token";

    private final StepRunner runner;
    private final ModelRunner.ResourceKeys resourceKeys;
    private final KVManager kv;
    private final SamplerResource sampler;
    private final NodeResourceSpec samplerSpec;
    /** The adapters' declaration; null when the engine serves none. */
    private final NodeResourceSpec adapterSpec;
    /** How a request that names no sampling config draws (the model's default). */
    private final SamplingReqConfig defaultSampling;
    private final StopRule stopRule;
    private final Constraints constraints;
    private final int pageSize;

    RequestResources(StepRunner runner, ModelRunner.ResourceKeys keys, KVManager kv, SamplerResource sampler,
                     NodeResourceSpec samplerSpec, NodeResourceSpec adapterSpec, SamplingReqConfig defaultSampling,
                     StopRule stopRule, Constraints constraints, int pageSize) {
        this.runner = runner;
        this.resourceKeys = keys;
        this.kv = kv;
        this.sampler = sampler;
        this.samplerSpec = samplerSpec;
        this.adapterSpec = adapterSpec;
        this.defaultSampling = defaultSampling;
        this.stopRule = stopRule;
        this.constraints = constraints;
        this.pageSize = pageSize;
    }

    /**
     * Open {@code r} everywhere; a request with generated tokens continues their random stream, and its constraint
     * (compiled or taken from the cache) stands where those tokens lead.
     */
    void open(LiveRequest r) {
        SamplingReqConfig sampling = sampling(r.request);
        AdapterReqConfig adapter = adapter(r.request);
        TokenAutomaton constraint = constraints.automaton(r.request);
        byte[] seed = adapter == null ? PrefixKeys.NO_PREV : adapterSeed(adapter.adapter());
        int whole = r.prompt.length / pageSize * pageSize;
        int[] tail = Arrays.copyOfRange(r.prompt, whole, r.prompt.length);
        List<byte[]> keys = new ArrayList<>(PrefixKeys.chain(r.prompt, pageSize, seed));
        if (tail.length > 0) {
            // the chain takes a prompt that ends inside a page with that partial page's key last (never indexed,
            // replaced once generated tokens fill the page); without it the last whole page would be taken for it
            keys.add(PrefixKeys.pageKey(keys.isEmpty() ? seed : keys.get(keys.size() - 1), tail, List.of()));
        }
        KVReqConfig kvCfg = new KVReqConfig(null, null, null, null, null,
                Map.of(Segment.MAIN, keys),
                Map.of(Segment.MAIN, tail),
                Map.of(Segment.MAIN, OUT), true, null, null,
                Map.of(Segment.MAIN, seed));
        Map<String, ResourceReqConfig> overrides = new HashMap<>(Map.of(resourceKeys.kv(), kvCfg,
                resourceKeys.sampler(), sampling));
        if (adapter != null) {
            overrides.put(resourceKeys.adapters(), adapter);
        }
        runner.ingestRequest(r.id(), overrides);
        if (r.program != null) {
            // the program's sequences end by its rules, not by stop ids
            sampler.suppress(r.id(), r.program.suppressed());
            restoreSampler(r);
            return;
        }
        sampler.setStopIds(r.id(), stopRule.stopIds(r.request));
        if (constraint != null) {
            sampler.constrain(r.id(), constraint);
        }
        if (r.generated.size() > 0) {
            sampler.restore(r.id(), r.prompt, r.generated.toArray());
            r.promptTracked = true;
        }
    }

    /** The sampler's state of {@code r}'s sequence as it stands: its tokens accepted, the next draw after them. */
    void restoreSampler(LiveRequest r) {
        sampler.restore(r.id(), new int[0], r.program.sequenceGenerated());
    }

    /**
     * The request's sampling config, checked against this engine's sampler.
     *
     * @throws org.mstar.resources.RequestValidationException naming the field
     */
    SamplingReqConfig sampling(GenerationRequest request) {
        SamplingReqConfig sampling = request.sampling() == null ? defaultSampling : request.sampling();
        sampling.validate(samplerSpec);
        return sampling;
    }

    /**
     * The request's adapter, checked against this engine's; null for the base model.
     *
     * @throws org.mstar.resources.RequestValidationException naming the field: an adapter this engine does not serve
     */
    AdapterReqConfig adapter(GenerationRequest request) {
        if (request.adapter() == null) {
            return null;
        }
        AdapterReqConfig adapter = new AdapterReqConfig(request.adapter());
        adapter.validate(adapterSpec);
        return adapter;
    }

    /** The key a request with {@code adapter} roots its pages at: the adapter's name and what its weights are. */
    private byte[] adapterSeed(String adapter) {
        return PrefixKeys.fingerprint("adapter", adapter, ((AdapterSpec) adapterSpec).library().identity(adapter));
    }

    /** Ask the prefix cache how much of {@code r}'s fresh prompt it holds; the walk then skips that many tokens. */
    int probePrefix(LiveRequest r) {
        r.probed = true;
        Map<String, int[]> inputs = Map.of(OUT, r.prompt);
        CachedPrefix prefix = runner.resolveCachedPrefix(r.id(), resourceKeys.node(), resourceKeys.walk(), inputs);
        runner.applyCachedPrefix(r.id(), resourceKeys.node(), resourceKeys.walk(), inputs, prefix);
        int hit = prefix == null ? 0 : prefix.tokens();
        r.computed = hit;
        r.cachedPromptTokens = hit;
        return hit;
    }

    /**
     * Take {@code victim}'s KV away: to host pages when the cache has a host pool with room, otherwise freed,
     * so it is recomputed later from prompt + generated tokens with the same random stream.
     */
    void preempt(LiveRequest victim) {
        if (kv.capability(Offload.class).map(o -> o.offload(victim.id())).orElse(0) > 0) {
            victim.status = RequestStatus.OFFLOADED;
            return;
        }
        recompute(victim);
    }

    /**
     * Free everything {@code r} holds on every resource — whatever a step left half done — and open it afresh,
     * so its KV is recomputed from prompt + generated tokens with the same random stream.
     */
    void recompute(LiveRequest r) {
        runner.removeRequest(r.id());
        r.dropKv();
        r.cachedPromptTokens = 0;
        open(r);
    }

    /** Bring an offloaded request back; false, with nothing changed, when its pages do not fit. */
    boolean reload(LiveRequest r) {
        if (!kv.reload(r.id())) {
            return false;
        }
        r.status = RequestStatus.RUNNING;
        return true;
    }

    /** Extend the prefix chain with a sampled token, so the pages it fills can be shared. */
    void extendPrefix(LiveRequest r, int token) {
        runner.extendPrefixChains(r.id(), resourceKeys.node(), resourceKeys.walk(), Map.of(OUT, new int[] {token}));
    }

    /** Whether {@code r}'s constraint is satisfied and allows nothing more: its output is complete. */
    boolean constraintComplete(LiveRequest r) {
        return sampler.constraintComplete(r.id());
    }

    void close(String rid) {
        runner.removeRequest(rid);
    }
}
