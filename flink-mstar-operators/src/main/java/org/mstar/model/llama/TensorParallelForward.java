package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.DeviceGroup;
import org.mstar.device.Tensor;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.kv.KVManager;

/**
 * A Llama-family forward over the devices of a {@link DeviceGroup}: every rank runs the layers at once on its own
 * thread ({@link LlamaForwardPass} with its {@link RankContext}), meeting in the all-reduces; rank 0 computes on the
 * resources' device and the others on copies of the step's inputs ({@link MirroredInputs}) and pools of their own for
 * each cache (the pages the one KV manager allocated, this rank's heads). Each rank's LM head gives the logits of its
 * vocabulary rows, gathered through the host into rank 0's logits, which the sampler reads.
 */
final class TensorParallelForward implements AutoCloseable {
    private final LlamaModel model;
    private final ShardedWeights weights;
    private final DeviceGroup group;
    /** Per rank (index 0 unused: rank 0 writes the managers' own pools), each cache's pool on that rank's device. */
    private final List<Map<KVManager, Tensor>> pools = new ArrayList<>();

    TensorParallelForward(LlamaModel model, ShardedWeights weights, DeviceGroup group) {
        this.model = model;
        this.weights = weights;
        this.group = group;
    }

    /** Allocates every other rank's pool of each cache, of the shape of the cache's own (which holds rank 0's heads). */
    void bind(LlamaResources res) {
        close();
        for (int r = 0; r < group.size(); r++) {
            Map<KVManager, Tensor> mine = new HashMap<>();
            for (KVManager cache : caches(res)) {
                if (r > 0) {
                    Tensor pool = cache.pool();
                    mine.put(cache, group.device(r).zeros(pool.dtype(), pool.shape()));
                }
            }
            pools.add(mine);
        }
    }

    private static List<KVManager> caches(LlamaResources res) {
        return Stream.of(res.kv(), res.kvWindowed()).filter(c -> c != null).toList();
    }

    /** As {@link LlamaModel#forward}: logits {@code [sampleRows.length, vocab]} on rank 0's device. */
    Tensor run(Tensor tokens, int[] sampleRows, DType activations) {
        LlamaResources res = model.resources();
        List<AttentionManager> attentions = Stream.of(res.attention(), res.windowed()).filter(a -> a != null).toList();
        int n = group.size();
        MirroredInputs[] mirrors = new MirroredInputs[n];
        Tensor[] parts = new Tensor[n];
        try {
            for (int r = 1; r < n; r++) {
                mirrors[r] = new MirroredInputs(group.device(r), pools.get(r), attentions, res, tokens);
            }
            group.parallel(r -> {
                RankInputs inputs = r == 0 ? RankInputs.of(res) : mirrors[r];
                RankContext rank = new RankContext(r, group.device(r), weights.rank(r), weights.layout(), inputs,
                        group.allReduce());
                parts[r] = new LlamaForwardPass(model, activations, rank).run(r == 0 ? tokens : mirrors[r].tokens(),
                        sampleRows);
            });
            return gather(parts, sampleRows.length);
        } finally {
            for (int r = 0; r < n; r++) {
                if (parts[r] != null) {
                    parts[r].close();
                }
                if (mirrors[r] != null) {
                    mirrors[r].close();
                }
            }
        }
    }

    /** Each rank's vocabulary columns of every row, into one tensor on rank 0's device. */
    private Tensor gather(Tensor[] parts, int rows) {
        ShardLayout layout = weights.layout();
        int vocab = layout.vocab();
        float[] all = new float[Math.multiplyExact(rows, vocab)];
        for (int r = 0; r < parts.length; r++) {
            float[] p = parts[r].device().toFloats(parts[r]);
            int first = layout.vocabFirst(r);
            int count = layout.vocabCount(r);
            for (int row = 0; row < rows; row++) {
                System.arraycopy(p, row * count, all, row * vocab + first, count);
            }
        }
        Device root = group.device(0);
        return root.fromFloats(all, DType.F32, rows, vocab);
    }

    @Override
    public void close() {
        pools.forEach(m -> m.values().forEach(Tensor::close));
        pools.clear();
    }
}
