package org.mstar.model.llama;

import org.mstar.device.Tensor;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.KvWriter;

/**
 * What one rank's forward reads from the step's plans, on its own device: RoPE positions, the KV write addresses with
 * its pool, the attention plan. The first rank (and a single-device model) reads the resources themselves
 * ({@link #of}); the others read copies on their devices ({@link MirroredInputs}).
 */
interface RankInputs {

    /** The first {@code n} position ids planned for the forward's label. */
    Tensor positions(long n);

    /** Runs {@code writer} with this rank's pool of {@code cache} and the step's write addresses. */
    void writeKv(KVManager cache, int poolLayer, long n, KvWriter writer);

    /** Paged attention of {@code q} over this rank's pool of {@code cache}, with the plan of {@code attention}. */
    void attend(AttentionManager attention, KVManager cache, Tensor q, int poolLayer, Tensor out);

    /** The resources themselves: the device they were built on. */
    static RankInputs of(LlamaResources res) {
        return new RankInputs() {
            @Override
            public Tensor positions(long n) {
                return res.rope().firstIds(DecoderPass.LABEL, n);
            }

            @Override
            public void writeKv(KVManager cache, int poolLayer, long n, KvWriter writer) {
                cache.writeKv(poolLayer, DecoderPass.LABEL, n, writer);
            }

            @Override
            public void attend(AttentionManager attention, KVManager cache, Tensor q, int poolLayer, Tensor out) {
                attention.run(q, DecoderPass.LABEL, poolLayer, cache.pool(), out);
            }
        };
    }
}
