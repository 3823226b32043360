package org.mstar.model.mamba;

import java.util.Map;
import org.mstar.resources.Resource;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.position.RopeManager;
import org.mstar.resources.recurrent.RecurrentStateManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * The built resources a {@link HybridModel} forward reads. {@code attention} and {@code rope} are null for a model
 * without attention layers (Mamba2), whose {@code kv} then only counts each request's tokens.
 */
public record HybridResources(KVManager kv, AttentionManager attention, RopeManager rope,
                              RecurrentStateManager states, SamplerResource sampler) {
    static HybridResources from(Map<String, Resource> built) {
        return new HybridResources((KVManager) built.get(HybridModel.KV),
                (AttentionManager) built.get(HybridModel.ATTN),
                (RopeManager) built.get(HybridModel.ROPE), (RecurrentStateManager) built.get(HybridModel.STATES),
                (SamplerResource) built.get(HybridModel.SAMPLER));
    }
}
