package org.mstar.engine.llama;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.ModelRequest;
import org.mstar.engine.ModelRunner;
import org.mstar.model.ModelCost;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.lora.PeftAdapters;
import org.mstar.resources.AdapterSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.Resource;
import org.mstar.resources.Segment;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The Llama family ({@link LlamaModel}: Llama, Mistral, Qwen, Gemma, Phi) as the engine loop's model, with the
 * per-request LoRA adapters of a PEFT folder when the engine serves some.
 */
public final class LlamaRunner implements ModelRunner {
    private static final ResourceKeys KEYS = new ResourceKeys(LlamaModel.NODE, LlamaModel.WALK, LlamaModel.KV,
            LlamaModel.SAMPLER, LlamaModel.ROPE, LlamaModel.ADAPTERS);

    private final LlamaModel model;
    /** Null when the engine serves no adapters. */
    private final AdapterSpec adapters;

    public LlamaRunner(LlamaModel model) {
        this(model, null);
    }

    /**
     * @param adapters the adapters served, null for none
     * @throws org.mstar.model.ModelFormatException naming an adapter that does not fit the model or is not plain LoRA
     */
    public LlamaRunner(LlamaModel model, AdapterOptions adapters) {
        if (adapters != null && model.layout().degree() > 1) {
            throw new IllegalArgumentException("tensor parallel " + model.layout().degree()
                    + " does not serve LoRA adapters yet");
        }
        this.model = model;
        this.adapters = adapters == null ? null : new AdapterSpec(LlamaModel.ADAPTERS, Set.of(LlamaModel.NODE),
                library(adapters, model), adapters.slots());
    }

    private static PeftAdapters library(AdapterOptions adapters, LlamaModel model) {
        try {
            return PeftAdapters.open(adapters.folder(), model.config());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the adapters in " + adapters.folder(), e);
        }
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
        return model.config().maxPositionEmbeddings();
    }

    /** A page's bytes on one device: under tensor parallelism each device holds its share of the heads. */
    @Override
    public long kvPageBytes(int pageSize, DType kvDType) {
        return ModelCost.kvPageBytes(model.config(), pageSize, kvDType) / model.layout().degree();
    }

    @Override
    public List<Object> identity() {
        return List.of(model.config().toJson().toString(), model.weightsId());
    }

    @Override
    public List<NodeResourceSpec> declareResources(KvCacheOptions kv, List<Integer> stopIds) {
        List<NodeResourceSpec> specs = new ArrayList<>(model.declareResources(kv, stopIds));
        if (adapters != null) {
            specs.add(adapters);
        }
        return specs;
    }

    @Override
    public int mainCacheWindow() {
        return model.mainCacheWindow();
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

    /**
     * The main KV cache's and the positions' codecs: a disaggregated engine has no separate windowed-layer cache
     * ({@code EngineOptions} refuses one).
     */
    @Override
    public Map<String, PublishedInfoCodec<?>> handoffCodecs() {
        return Map.of(LlamaModel.KV, model.resources().kv().codec(), LlamaModel.ROPE, model.resources().rope().codec());
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

    /** Steps with adapter rows take the unfused projections and the adapter ops: a graph of their own. */
    @Override
    public int graphVariant() {
        return model.adaptersActive() ? 1 : 0;
    }

    @Override
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        model.forwardAllRows(tokens, logits, held);
    }
}
