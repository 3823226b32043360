package org.mstar.engine;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.Resource;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.Segment;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * What a model contributes to the engine loop ({@link EngineCore}): the resources it declares and binds, the step
 * the resources see for a batch, and its forward, eager or over every row for a recorded decode graph. The core
 * owns everything else — scheduling, admission, preemption, fault isolation, pre-planning, launch-ahead, sampling
 * and turning tokens into events — so what one model gains there every model has.
 *
 * <p>A model whose request is more than a prompt followed by generated tokens (Whisper: audio, decoded window by
 * window) also opens each request as a {@link ModelRequest}, says how many KV pages a request's model state takes
 * ({@link #statePages}), and reads the model inputs of a sequence's first step in its forward.
 *
 * <p>Implementations live beside their model, outside the core's package, and see the core only through this
 * interface and {@link ModelRequest} (an ArchUnit rule keeps it so).
 */
public interface ModelRunner {

    /**
     * The keys of the model's step graph and of the resources the core drives by name; {@code adapters} is the key
     * of the per-request adapters' resource when the model declares one ({@code AdapterSpec}), else null.
     */
    record ResourceKeys(String node, String walk, String kv, String sampler, String position, String adapters) {}

    ResourceKeys keys();

    Device device();

    int vocabSize();

    /** Longest sequence the model's positions allow. */
    int maxPositions();

    /** Bytes one KV page of {@code pageSize} tokens takes over all layers, keys and values. */
    long kvPageBytes(int pageSize, DType kvDType);

    /** What the weights are, for the prefix cache's root: pages cached under other weights never match. */
    List<Object> identity();

    /** The resources the model needs, for {@code ResourceFactory.buildAll}. */
    List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds);

    /**
     * The window, in tokens, that the main cache keeps of each request; 0 when it keeps every token. Known once
     * {@link #declareResources} ran.
     */
    int mainCacheWindow();

    /** Take the resources built from {@link #declareResources}. */
    void bind(Map<String, Resource> built);

    /** The main KV cache, once bound. */
    KVManager kv();

    /** The sampler, once bound. */
    SamplerResource sampler();

    /**
     * Per resource key, the codec of what that resource publishes, once bound: a disaggregated hand-off carries
     * each resource's publication as the bytes of its codec, which only that resource reads.
     */
    Map<String, PublishedInfoCodec<?>> handoffCodecs();

    /**
     * The step for one batch: one segment per row, {@code promptTokens} entering the sampler's seen set for rows
     * starting their prompt, only {@code sampledRids} keeping a sampled token. {@code starting} (row order) are
     * the rows of {@link ModelRequest}s whose step starts a sequence: their model state is written in it.
     */
    SubmoduleStep declareStep(List<Segment> segments, List<String> starting, Map<String, int[]> promptTokens,
                              Set<String> sampledRids);

    /**
     * Runs the planned step of {@code tokens} (I32, segment order): F32 logits of the rows {@code outputRows},
     * {@code [outputRows.length, vocab]}, the caller's to close. {@code starting} are the {@link ModelRequest}s
     * whose step starts a sequence, in row order, whose model inputs beyond tokens the forward reads.
     */
    Tensor forward(Tensor tokens, int[] outputRows, List<ModelRequest> starting);

    /**
     * Which recorded forward the planned step needs: decode graphs are recorded per batch bucket and variant, since a
     * model may take another path for some steps (the Llama runner's steps with adapter rows). 0 by default.
     */
    default int graphVariant() {
        return 0;
    }

    /**
     * Runs the planned step with every row sampling into {@code logits}, adding its temporaries to {@code held}
     * instead of freeing them, so a recorded graph can keep addressing them.
     */
    void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held);

    /**
     * The model's own part of {@code request} (which already generated {@code generated}), checked against the
     * model; null when the request is a prompt followed by generated tokens, which the core checks and runs.
     *
     * @throws org.mstar.resources.RequestValidationException a client's mistake, naming the field
     */
    default ModelRequest openRequest(GenerationRequest request, int[] generated) {
        return null;
    }

    /** KV pages a request's model state takes beside its tokens' (written by a sequence's first step). */
    default int statePages(int pageSize) {
        return 0;
    }

    /**
     * Tokens at whose multiples a prefill chunk must end (a recurrent model's prefix cache snapshots its state
     * between steps only), so no chunk runs across one; 0 when chunks may end anywhere.
     */
    default int prefillChunkEdge() {
        return 0;
    }

    /** How a request that names no sampling config draws. */
    default SamplingReqConfig defaultSampling() {
        return SamplingReqConfig.DEFAULTS;
    }
}
