package org.mstar.engine.mamba;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.engine.ModelRequest;
import org.mstar.engine.ModelRunner;
import org.mstar.model.HybridConfig;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.mamba.HybridModel;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.Resource;
import org.mstar.resources.Segment;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Models of Mamba2 mixers ({@link HybridModel}: Mamba2, Bamba) as the engine loop's model. Each request's recurrent
 * state lives in a slot of the model's state resource from its first step to its end; a preempted request gives its
 * slot up and is recomputed from its prompt and generated tokens. With the prefix cache on, prefill chunks end at
 * the state snapshots' points.
 */
public final class HybridRunner implements ModelRunner {
    private static final ResourceKeys KEYS = new ResourceKeys(HybridModel.NODE, HybridModel.WALK, HybridModel.KV,
            HybridModel.SAMPLER, HybridModel.ROPE, null);

    private final HybridModel model;

    public HybridRunner(HybridModel model) {
        this.model = model;
    }

    @Override
    public ResourceKeys keys() {
        return KEYS;
    }

    @Override
    public Device device() {
        return model.device();
    }

    @Override
    public int vocabSize() {
        return model.config().vocabSize();
    }

    @Override
    public int maxPositions() {
        return model.config().maxPositions();
    }

    /** The attention layers' K and V of a page; a model without attention counts a one-element layer's. */
    @Override
    public long kvPageBytes(int pageSize, DType kvDType) {
        HybridConfig c = model.config();
        int layers = c.attentionLayers().size();
        return layers == 0 ? 2L * pageSize * kvDType.bytes()
                : 2L * layers * pageSize * c.kvHeads() * c.attentionHeadDim() * kvDType.bytes();
    }

    @Override
    public List<Object> identity() {
        return List.of(model.config().toString(), model.weightsId());
    }

    @Override
    public List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds) {
        return model.declareResources(kv, stopIds);
    }

    @Override
    public int mainCacheWindow() {
        return 0;
    }

    /** The state snapshots' interval: a snapshot is taken only between steps. */
    @Override
    public int prefillChunkEdge() {
        return model.snapshotInterval();
    }

    @Override
    public void bind(Map<String, Resource> built) {
        model.bind(built);
    }

    @Override
    public KVManager kv() {
        return model.resources().kv();
    }

    @Override
    public SamplerResource sampler() {
        return model.resources().sampler();
    }

    /** Only a colocated engine serves these models ({@code HybridEngine} refuses the other roles). */
    @Override
    public Map<String, PublishedInfoCodec<?>> handoffCodecs() {
        return Map.of();
    }

    @Override
    public SubmoduleStep declareStep(List<Segment> segments, List<String> starting, Map<String, int[]> promptTokens,
                                     Set<String> sampledRids) {
        return model.declareStep(segments, promptTokens, sampledRids);
    }

    @Override
    public Tensor forward(Tensor tokens, int[] outputRows, List<ModelRequest> starting) {
        return model.forward(tokens, outputRows);
    }

    @Override
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        model.forwardAllRows(tokens, logits, held);
    }
}
