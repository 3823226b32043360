package org.mstar.model.llama;

import java.util.Map;
import org.mstar.resources.Resource;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.position.RopeManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The built resources a Llama forward reads, by the keys {@link LlamaModel} declares. {@code windowed}
 * is the attention of sliding-window layers, null when no layer uses a window.
 */
public record LlamaResources(KVManager kv, AttentionManager attention, AttentionManager windowed, RopeManager rope,
                             SamplerResource sampler) {

    static LlamaResources from(Map<String, Resource> built) {
        return new LlamaResources(
                (KVManager) built.get(LlamaModel.KV),
                (AttentionManager) built.get(LlamaModel.ATTN),
                (AttentionManager) built.get(LlamaModel.ATTN_WINDOWED),
                (RopeManager) built.get(LlamaModel.ROPE),
                (SamplerResource) built.get(LlamaModel.SAMPLER));
    }

    AttentionManager forLayer(LlamaModel model, int layer) {
        return model.config().attentionWindow(layer) > 0 && windowed != null ? windowed : attention;
    }
}
