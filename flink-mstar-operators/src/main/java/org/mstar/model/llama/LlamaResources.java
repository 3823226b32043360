package org.mstar.model.llama;

import java.util.Map;
import org.mstar.model.ModelConfig;
import org.mstar.resources.Resource;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.lora.AdapterManager;
import org.mstar.resources.position.RopeManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The built resources a Llama forward reads, by the keys {@link LlamaModel} declares. {@code windowed}
 * is the attention of sliding-window layers, null when no layer uses a window; {@code kvWindowed} is the separate
 * cache of those layers ({@link KvCacheOptions#windowedLayerPages()}), null when every layer uses {@code kv}.
 * {@code poolLayers[l]} is layer l's index in the pool of the cache it uses. {@code adapters} holds the per-request
 * adapters, null when the engine serves none.
 */
public record LlamaResources(KVManager kv, KVManager kvWindowed, AttentionManager attention, AttentionManager windowed,
                             RopeManager rope, SamplerResource sampler, int[] poolLayers, AdapterManager adapters) {

    static LlamaResources from(Map<String, Resource> built, ModelConfig config) {
        KVManager kvWindowed = (KVManager) built.get(LlamaModel.KV_WINDOWED);
        return new LlamaResources(
                (KVManager) built.get(LlamaModel.KV),
                kvWindowed,
                (AttentionManager) built.get(LlamaModel.ATTN),
                (AttentionManager) built.get(LlamaModel.ATTN_WINDOWED),
                (RopeManager) built.get(LlamaModel.ROPE),
                (SamplerResource) built.get(LlamaModel.SAMPLER),
                poolLayers(config, kvWindowed != null),
                (AdapterManager) built.get(LlamaModel.ADAPTERS));
    }

    /** Each layer's index in its cache: in order among the windowed or the other layers when they are apart. */
    static int[] poolLayers(ModelConfig config, boolean windowedApart) {
        int[] out = new int[config.numLayers()];
        int windowed = 0;
        int other = 0;
        for (int l = 0; l < out.length; l++) {
            out[l] = !windowedApart ? l : config.attentionWindow(l) > 0 ? windowed++ : other++;
        }
        return out;
    }

    AttentionManager forLayer(LlamaModel model, int layer) {
        return model.config().attentionWindow(layer) > 0 && windowed != null ? windowed : attention;
    }

    /** The cache {@code layer} writes its K and V to and attends over. */
    KVManager kvFor(LlamaModel model, int layer) {
        return kvWindowed != null && model.config().attentionWindow(layer) > 0 ? kvWindowed : kv;
    }
}
