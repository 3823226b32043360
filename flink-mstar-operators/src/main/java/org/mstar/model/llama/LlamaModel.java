package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceGroup;
import org.mstar.device.Tensor;
import org.mstar.model.ModelConfig;
import org.mstar.resources.AdapterStep;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.KVSpec;
import org.mstar.resources.KVStep;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.PositionStep;
import org.mstar.resources.PosBackend;
import org.mstar.resources.PosScheme;
import org.mstar.resources.Resource;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.SamplerStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StreamLabel;
import org.mstar.resources.SubmoduleStep;

/**
 * A Llama-family decoder (Llama 2/3/3.x, Qwen2/3, Mistral, Gemma 3, Phi-3/4, the mixtures of experts OLMoE and
 * Qwen3-MoE, and DeepSeek-V2, whose latent attention keeps latent KV pages and runs {@link LatentForwardPass}) on the resource layer: it declares its
 * resources (paged KV, attention, RoPE positions, sampler), builds a {@link SubmoduleStep} per batch,
 * and runs its forward through the device's compute ops, reading the resources' plans.
 *
 * <p>One node ({@link #NODE}) and one walk ({@link #WALK}) cover prefill and decode alike: a step is a
 * list of segments on the "main" stream, and every segment's last token yields logits.
 */
public final class LlamaModel implements AutoCloseable {
    public static final String NODE = "llm";
    public static final String WALK = "generate";
    public static final String KV = "kv";
    public static final String ATTN = "attn";
    public static final String ATTN_WINDOWED = "attn_windowed";
    /** The separate cache of the windowed layers, when {@link KvCacheOptions#windowedLayerPages()} asks for one. */
    public static final String KV_WINDOWED = "kv_windowed";
    public static final String ROPE = "rope";
    public static final String SAMPLER = "sampler";
    /** The per-request adapters, when the engine serves some (declared by the runner, not by this model). */
    public static final String ADAPTERS = "adapters";

    private final ModelConfig config;
    private final LlamaWeights weights;
    private final Device device;
    private final DType activations;
    private final String weightsId;
    /** The layout over the devices of a tensor-parallel model; degree 1 on one device. */
    private final ShardLayout layout;
    /** The weights' slices and the forward over the group, null on one device. */
    private final ShardedWeights shards;
    private final TensorParallelForward parallel;
    private LlamaResources resources;
    /** Whether every layer is windowed and the one cache keeps each request's window only (set by declareResources). */
    private boolean mainCacheWindowed;

    /**
     * @param activations dtype of hidden states between ops (F32 on the CPU reference; BF16 on a GPU)
     * @param weightsId names these exact weights (a checkpoint path, "random:seed"); it keys the prefix cache
     */
    public LlamaModel(LlamaWeights weights, DType activations, String weightsId) {
        this(weights, weights.device(), activations, weightsId);
    }

    /**
     * A model computing through {@code device}: the weights' device or a view of it with other kernel options
     * ({@link Device#withOptions}), so that models over one copy of the weights can run different kernel variants.
     */
    public LlamaModel(LlamaWeights weights, Device device, DType activations, String weightsId) {
        if (!device.name().equals(weights.device().name())) {
            throw new IllegalArgumentException("weights on " + weights.device().name() + " cannot be computed on "
                    + device.name());
        }
        this.config = weights.config();
        this.weights = weights;
        this.device = device;
        this.activations = activations;
        this.weightsId = weightsId;
        this.layout = ShardLayout.of(config, 1);
        this.shards = null;
        this.parallel = null;
    }

    /**
     * A model split over the devices of {@code group} (tensor parallelism for attention and the dense MLPs, expert
     * parallelism for routed experts), computing on rank 0's device as far as the resources see: its KV cache holds
     * rank 0's heads and allocates the pages every rank's pool uses; the model owns the shards, not the group.
     *
     * @throws IllegalArgumentException when the model cannot split over the group ({@link ShardLayout#of})
     */
    public LlamaModel(ShardedWeights shards, DeviceGroup group, DType activations, String weightsId) {
        this.weights = shards.rank(0);
        this.config = weights.config();
        this.device = group.device(0);
        this.activations = activations;
        this.weightsId = weightsId;
        this.layout = shards.layout();
        this.shards = shards;
        this.parallel = new TensorParallelForward(this, shards, group);
    }
    public ModelConfig config() { return config; }
    public Device device() { return device; }
    public LlamaWeights weights() { return weights; }
    public LlamaResources resources() { return resources; }
    public String weightsId() { return weightsId; }
    public DType activations() { return activations; }
    /** How the model splits over its devices: degree 1 on one device. */
    public ShardLayout layout() { return layout; }

    /**
     * The resources this model needs, for {@code ResourceFactory.buildAll}. With
     * {@link KvCacheOptions#windowedLayerPages()} each request keeps only the window of its sliding-window layers:
     * a model with global layers too (Gemma 3) puts its windowed layers in a cache of their own ({@link #KV_WINDOWED},
     * attended by {@link #ATTN_WINDOWED}) and the other cache holds the global layers alone; a model whose every layer
     * is windowed (Mistral, Phi-3) runs its one cache under that retention instead, with no second cache to size.
     *
     * @throws IllegalArgumentException when the windowed-layer cache is asked of a model without windowed layers
     */
    public List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds) {
        Set<String> nodes = Set.of(NODE);
        int windowedLayers = 0;
        for (int l = 0; l < config.numLayers(); l++) {
            windowedLayers += config.attentionWindow(l) > 0 ? 1 : 0;
        }
        boolean windowOnly = kv.windowedLayerPages() > 0;
        if (windowOnly && windowedLayers == 0) {
            throw new IllegalArgumentException("a windowed-layer cache needs windowed layers; "
                    + config.architecture().hfName() + " has none of " + config.numLayers());
        }
        boolean apart = windowOnly && windowedLayers < config.numLayers();
        mainCacheWindowed = windowOnly && !apart;
        List<NodeResourceSpec> specs = new ArrayList<>();
        specs.add(new KVSpec(KV, nodes, kvConfig(kv, apart ? config.numLayers() - windowedLayers : config.numLayers(),
                kv.maxNumPages(), kv.prefixCache(), kv.cpuOffloadPages())));
        AttentionConfig attention = new AttentionConfig(KV).withSmScale(config.attentionScale());
        specs.add(new AttentionSpec(ATTN, nodes, attention));
        if (apart) {
            specs.add(new KVSpec(KV_WINDOWED, nodes, kvConfig(kv, windowedLayers, kv.windowedLayerPages(), false, 0)));
            specs.add(new AttentionSpec(ATTN_WINDOWED, nodes, new AttentionConfig(KV_WINDOWED)
                    .withSmScale(config.attentionScale()).withSlidingWindow(config.slidingWindow())));
        } else if (config.slidingWindow() > 0) {
            specs.add(new AttentionSpec(ATTN_WINDOWED, nodes, attention.withSlidingWindow(config.slidingWindow())));
        }
        var rope = config.ropeParams();
        specs.add(new PositionSpec(ROPE, nodes, new PositionConfig(KV, PosBackend.ROPE, PosScheme.SEQUENTIAL, 1,
                rope.rotaryDim(), rope.interleave(), rope.scale(), rope.theta(),
                rope.llama31() ? rope.lowFreqFactor() : null, rope.llama31() ? rope.highFreqFactor() : null,
                rope.llama31() ? (int) rope.oldContextLen() : null)));
        specs.add(new SamplerSpec(SAMPLER, nodes, config.vocabSize(), true, true, 0, stopIds, true));
        return specs;
    }

    private PagedKVConfig kvConfig(KvCacheOptions kv, int layers, int pages, boolean prefixCache, int offloadPages) {
        if (config.latentAttention().isPresent()) {
            return LatentKvConfig.of(config, kv, layers, pages, prefixCache, offloadPages);
        }
        // each device's pool holds its own heads
        return PagedKVConfig.builder(layers, layout.kvHeads(), config.headDim(), kv.maxSeqLen())
                .numQoHeads(layout.heads())
                .maxNumPages(pages)
                .pageSize(kv.pageSize())
                .cpuOffloadPages(offloadPages)
                .prefixCache(prefixCache)
                .cacheDType(kv.cacheDType())
                .build();
    }

    /**
     * The window, in tokens, that the main cache keeps of each request (every layer windowed and the windowed-layer
     * option on); 0 when it keeps every token. Known once {@link #declareResources} ran.
     */
    public int mainCacheWindow() {
        return mainCacheWindowed ? config.slidingWindow() : 0;
    }

    /** Take the resources built from {@link #declareResources}. */
    public void bind(Map<String, Resource> built) {
        this.resources = LlamaResources.from(built, config);
        if (parallel != null) {
            parallel.bind(resources);
        }
    }

    /**
     * The step for one batch: one "main" segment per row, {@code promptTokens} entering the sampler's seen
     * set for rows starting their prompt, and only {@code sampledRids} keeping a sampled token.
     */
    public SubmoduleStep declareStep(List<Segment> segments, Map<String, int[]> promptTokens, Set<String> sampledRids) {
        Map<String, org.mstar.resources.ResourceStep> steps = new java.util.LinkedHashMap<>();
        steps.put(KV, mainCacheWindowed ? KVStep.builder().retention(windowRetention(segments)).build() : new KVStep());
        steps.put(ATTN, new AttentionStep());
        if (resources != null && resources.kvWindowed() != null) {
            steps.put(KV_WINDOWED, KVStep.builder().retention(windowRetention(segments)).build());
        }
        if (resources != null && resources.windowed() != null) {
            steps.put(ATTN_WINDOWED, new AttentionStep());
        }
        steps.put(ROPE, new PositionStep());
        steps.put(SAMPLER, new SamplerStep(null, true, true, promptTokens, sampledRids));
        if (resources != null && resources.adapters() != null) {
            steps.put(ADAPTERS, new AdapterStep());
        }
        return new SubmoduleStep(steps, segments);
    }

    /** FIFO retention: each row's stream keeps the last window of tokens (whole pages; up to one more page). */
    private Map<StreamLabel, RetentionPolicy> windowRetention(List<Segment> segments) {
        Map<StreamLabel, RetentionPolicy> window = new HashMap<>();
        for (Segment s : segments) {
            window.put(new StreamLabel(s.requestId(), s.label()), new RetentionPolicy(config.slidingWindow()));
        }
        return window;
    }

    /** Whether some row of the planned step runs with an adapter (its forward then applies the adapter ops). */
    public boolean adaptersActive() {
        return resources != null && resources.adapters() != null && resources.adapters().current().active();
    }

    /**
     * Run the planned step: {@code tokens} (I32, this step's tokens in segment order) through every layer,
     * then the LM head on the last token of the sequences at {@code sampleRows} (indexes into the step's
     * segments). Returns F32 logits {@code [sampleRows.length, vocab]}.
     */
    public Tensor forward(Tensor tokens, int[] sampleRows) {
        if (config.latentAttention().isPresent()) {
            return new LatentForwardPass(this, activations).run(tokens, sampleRows);
        }
        if (parallel != null) {
            return parallel.run(tokens, sampleRows, activations);
        }
        LlamaForwardPass pass = new LlamaForwardPass(this, activations);
        return pass.run(tokens, sampleRows);
    }

    /**
     * Run the planned step with the LM head on every row (each row one sequence's last token, as in a
     * decode step) into {@code logits} F32 {@code [rows, vocab]}. The pass's temporaries are added to
     * {@code held} rather than freed, so that recorded graph work can keep addressing them.
     */
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        if (parallel != null) {
            throw new UnsupportedOperationException("a graph records one device's stream; a tensor-parallel model "
                    + "runs its steps eagerly");
        }
        if (config.latentAttention().isPresent()) {
            new LatentForwardPass(this, activations).runAllRows(tokens, logits, held);
            return;
        }
        new LlamaForwardPass(this, activations).runAllRows(tokens, logits, held);
    }

    /**
     * The step's row of the last token of each segment at {@code sampleRows} (indexes into the step's segments); null
     * for null (every row).
     */
    int[] lastRows(int[] sampleRows) {
        if (sampleRows == null) {
            return null;
        }
        int[] last = resources.attention().lastRows(DecoderPass.LABEL);
        int[] rows = new int[sampleRows.length];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = last[sampleRows[i]];
        }
        return rows;
    }

    @Override
    public void close() {
        if (parallel != null) {
            parallel.close();
            shards.close();
            return;
        }
        weights.close();
    }
}
