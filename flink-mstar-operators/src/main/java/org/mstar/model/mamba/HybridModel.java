package org.mstar.model.mamba;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Mamba2Shape;
import org.mstar.device.Tensor;
import org.mstar.model.HybridConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.KVSpec;
import org.mstar.resources.KVStep;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PosBackend;
import org.mstar.resources.PosScheme;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.PositionStep;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.RecurrentStep;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.SamplerStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StateDType;
import org.mstar.resources.SubmoduleStep;

/**
 * A model of Mamba2 mixers ({@link HybridConfig}: Mamba2, or Bamba with attention layers between them) on the
 * resource layer. It declares a recurrent state per request ({@link RecurrentStateSpec}: each mixer's SSM state and
 * convolution window in a slot taken at the request's first step and kept until it ends), and for attention layers
 * a paged KV cache, attention and RoPE positions as the Llama family does; a model without attention still declares
 * a KV cache of one one-element layer, by which the engine counts each request's tokens. With the KV cache's prefix
 * cache on, the state resource keeps snapshots of states at every {@link StateSnapshots#interval} tokens of a prompt,
 * keyed as the KV pages ending there, and prefill chunks end at those points ({@link #snapshotInterval}): a request
 * whose prompt starts with a prefix both hold resumes from the snapshot and the attention layers' pages. Host offload
 * of KV is not offered: a preempted request is recomputed from its prompt and generated tokens.
 */
public final class HybridModel {
    public static final String NODE = "llm";
    public static final String WALK = "generate";
    public static final String KV = "kv";
    public static final String ATTN = "attn";
    public static final String ROPE = "rope";
    public static final String STATES = "states";
    public static final String SAMPLER = "sampler";

    private final HybridWeights weights;
    private final Device device;
    private final DType activations;
    private final String weightsId;
    private final int stateSlots;
    private final StateSnapshots snapshots;
    /** Tokens between a prompt's state snapshots once resources are declared with the prefix cache on; else 0. */
    private int snapshotInterval;
    private HybridResources resources;

    /**
     * @param activations dtype of hidden states between ops (F32 on the CPU reference; BF16 on a GPU)
     * @param weightsId   names these exact weights (a checkpoint path)
     * @param stateSlots  requests that hold a state at once (the pool has one more, the scratch slot)
     * @param snapshots   how the prefix cache keeps states, when the KV cache's prefix cache is on
     */
    public HybridModel(HybridWeights weights, DType activations, String weightsId, int stateSlots,
                       StateSnapshots snapshots) {
        this.weights = weights;
        this.device = weights.device();
        this.activations = activations;
        this.weightsId = weightsId;
        this.stateSlots = stateSlots;
        this.snapshots = snapshots;
    }

    public HybridConfig config() {
        return weights.config();
    }

    public Device device() {
        return device;
    }

    public HybridWeights weights() {
        return weights;
    }

    public HybridResources resources() {
        return resources;
    }

    public String weightsId() {
        return weightsId;
    }

    /**
     * Tokens between a prompt's state snapshots (a multiple of the page size), at whose multiples prefill chunks
     * end; 0 when the prefix cache is off or resources are not declared yet.
     */
    public int snapshotInterval() {
        return snapshotInterval;
    }

    /**
     * The resources this model needs, for {@code ResourceFactory.buildAll}.
     *
     * @throws IllegalArgumentException when {@code kv} asks for host offload or a windowed-layer cache
     */
    public List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds) {
        HybridConfig c = config();
        if (kv.cpuOffloadPages() > 0 || kv.windowedLayerPages() > 0) {
            throw new IllegalArgumentException(c.family().hfName() + " keeps a recurrent state per request: it has no"
                    + " host offload or windowed-layer cache (asked: offload pages " + kv.cpuOffloadPages()
                    + ", windowed-layer pages " + kv.windowedLayerPages() + ")");
        }
        if (kv.cacheDType() != KVCacheDType.AUTO) {
            throw new IllegalArgumentException(c.family().hfName() + " has no FP8 KV cache: KV cache dtype "
                    + kv.cacheDType().optionValue() + " covers the Llama family's paged attention; use 'auto'");
        }
        Set<String> nodes = Set.of(NODE);
        List<NodeResourceSpec> specs = new ArrayList<>();
        boolean attention = !c.attentionLayers().isEmpty();
        PagedKVConfig.Builder kvConfig = attention
                ? PagedKVConfig.builder(c.attentionLayers().size(), c.kvHeads(), c.attentionHeadDim(), kv.maxSeqLen())
                        .numQoHeads(c.attentionHeads())
                : PagedKVConfig.builder(1, 1, 1, kv.maxSeqLen());
        specs.add(new KVSpec(KV, nodes, kvConfig.maxNumPages(kv.maxNumPages()).pageSize(kv.pageSize())
                .prefixCache(kv.prefixCache()).build()));
        if (attention) {
            specs.add(new AttentionSpec(ATTN, nodes, new AttentionConfig(KV)
                    .withSmScale(1.0 / Math.sqrt(c.attentionHeadDim()))));
            specs.add(new PositionSpec(ROPE, nodes, new PositionConfig(KV, PosBackend.ROPE, PosScheme.SEQUENTIAL, 1,
                    c.rotaryDim(), false, 1.0, c.ropeTheta(), null, null, null)));
        }
        Mamba2Shape s = c.mixer();
        List<RecurrentLayer> layers = c.mambaLayers().stream().map(l -> new RecurrentLayer(l, s.heads(), s.headDim(),
                s.stateDim(), s.convDim(), s.convKernel())).toList();
        RecurrentStateSpec states = new RecurrentStateSpec(STATES, nodes, Segment.MAIN, layers, StateDType.F32,
                StateDType.F32, stateSlots + 1, 0);
        snapshotInterval = kv.prefixCache() ? snapshots.intervalIn(kv.pageSize()) : 0;
        specs.add(kv.prefixCache() ? states.withSnapshots(snapshots.slots(), snapshotInterval, kv.pageSize())
                : states);
        specs.add(new SamplerSpec(SAMPLER, nodes, c.vocabSize(), true, true, 0, stopIds, true));
        return specs;
    }

    /** Take the resources built from {@link #declareResources}. */
    public void bind(Map<String, Resource> built) {
        this.resources = HybridResources.from(built);
    }

    /**
     * The step for one batch: one "main" segment per row, {@code promptTokens} entering the sampler's seen set for
     * rows starting their prompt, only {@code sampledRids} keeping a sampled token.
     */
    public SubmoduleStep declareStep(List<Segment> segments, Map<String, int[]> promptTokens, Set<String> sampledRids) {
        Map<String, ResourceStep> steps = new LinkedHashMap<>();
        steps.put(KV, new KVStep());
        if (!config().attentionLayers().isEmpty()) {
            steps.put(ATTN, new AttentionStep());
            steps.put(ROPE, new PositionStep());
        }
        steps.put(STATES, new RecurrentStep());
        steps.put(SAMPLER, new SamplerStep(null, true, true, promptTokens, sampledRids));
        return new SubmoduleStep(steps, segments);
    }

    /**
     * Runs the planned step: {@code tokens} (I32, segment order) through every layer, then the LM head on the last
     * token of the segments {@code sampleRows}. Returns F32 logits {@code [sampleRows.length, vocab]}.
     */
    public Tensor forward(Tensor tokens, int[] sampleRows) {
        return new HybridForwardPass(this, activations).run(tokens, sampleRows);
    }

    /**
     * Runs the planned step with the LM head on every row into {@code logits} F32 {@code [rows, vocab]}, adding the
     * pass's temporaries to {@code held} (a recorded graph keeps addressing them).
     */
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        new HybridForwardPass(this, activations).runAllRows(tokens, logits, held);
    }
}
