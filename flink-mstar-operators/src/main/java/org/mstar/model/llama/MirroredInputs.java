package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.Device;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.kv.KvWriter;

/**
 * A rank's step inputs copied from the first rank's device: the tokens, positions, each cache's write addresses and
 * each attention's plan (index tensors only; the page tables are one, so every rank's pool is addressed by the same
 * pages), made on the step's thread before the ranks start, freed when the step ends. Each cache has its own pool on
 * this rank's device ({@code pools}), holding this rank's heads.
 */
final class MirroredInputs implements RankInputs, AutoCloseable {
    private final Device device;
    private final Map<KVManager, Tensor> pools;
    private final List<Tensor> copies = new ArrayList<>();
    private final Map<KVManager, Tensor[]> addresses = new IdentityHashMap<>();
    private final Map<AttentionManager, PagedAttentionPlan> plans = new IdentityHashMap<>();
    private final Tensor tokens;
    private final Tensor positions;

    /**
     * @param pools this rank's pool of each cache the model writes
     * @param attentions the attention resources the model's layers run (one or two)
     */
    MirroredInputs(Device device, Map<KVManager, Tensor> pools, List<AttentionManager> attentions,
                   LlamaResources res, Tensor tokens) {
        this.device = device;
        this.pools = pools;
        this.tokens = copy(tokens);
        long n = tokens.dim(0);
        this.positions = copy(res.rope().firstIds(DecoderPass.LABEL, n));
        for (KVManager cache : pools.keySet()) {
            Tensor[] addr = new Tensor[2];
            // the manager hands its addresses to a writer that stores nothing, so they can be copied
            cache.writeKv(0, DecoderPass.LABEL, n, (pool, layer, pages, offsets) -> {
                addr[0] = copy(pages);
                addr[1] = copy(offsets);
            });
            addresses.put(cache, addr);
        }
        for (AttentionManager a : attentions) {
            PagedAttentionPlan p = a.pagedPlan(DecoderPass.LABEL);
            plans.put(a, new PagedAttentionPlan(p.rows(), copy(p.qoIndptr()), copy(p.kvIndptr()),
                    copy(p.kvIndices()), copy(p.lastPageLen()), p.pageSize(), p.totalQo(), p.maxQoLen(), p.maxKvLen(),
                    p.causal(), p.windowLeft(), p.contextOnly(), p.smScale()));
        }
    }

    private Tensor copy(Tensor ints) {
        Tensor t = device.fromInts(ints.device().toInts(ints), ints.shape());
        copies.add(t);
        return t;
    }

    /** The step's tokens on this rank's device. */
    Tensor tokens() {
        return tokens;
    }

    @Override
    public Tensor positions(long n) {
        return n == positions.dim(0) ? positions : positions.rows(0, n);
    }

    @Override
    public void writeKv(KVManager cache, int poolLayer, long n, KvWriter writer) {
        Tensor[] addr = addresses.get(cache);
        if (addr[0] == null) {
            return; // the step writes no token
        }
        writer.write(pools.get(cache), poolLayer, addr[0], addr[1]);
    }

    @Override
    public void attend(AttentionManager attention, KVManager cache, Tensor q, int poolLayer, Tensor out) {
        device.ops().pagedAttention(q, pools.get(cache), poolLayer, plans.get(attention), out);
    }

    @Override
    public void close() {
        copies.forEach(Tensor::close);
    }
}
