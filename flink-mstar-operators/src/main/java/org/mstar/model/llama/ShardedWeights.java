package org.mstar.model.llama;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.mstar.device.DeviceGroup;
import org.mstar.device.Fp8Weight;
import org.mstar.device.Tensor;
import org.mstar.model.ModelConfig;
import org.mstar.model.moe.MoeLayerWeights;

/**
 * A model's weights split over the devices of a {@link DeviceGroup} as {@link ShardLayout} says: one
 * {@link LlamaWeights} per rank on its device, holding the whole model's config and that rank's slices (a rank's
 * fused q/k/v weight is its q heads, then its k heads, then its v heads; its gate/up weight its gate columns, then its
 * up columns; its LM head its vocabulary rows). Each weight is read to the host once and each rank's slice uploaded in
 * the weight's dtype, so the split is exact.
 */
public final class ShardedWeights implements AutoCloseable {
    private final ShardLayout layout;
    private final List<LlamaWeights> ranks;

    private ShardedWeights(ShardLayout layout, List<LlamaWeights> ranks) {
        this.layout = layout;
        this.ranks = List.copyOf(ranks);
    }

    /** Every rank's slice of {@code full} (which stays the caller's to close), on the group's devices. */
    public static ShardedWeights split(LlamaWeights full, ShardLayout layout, DeviceGroup group) {
        if (group.size() != layout.degree()) {
            throw new IllegalArgumentException("a layout over " + layout.degree() + " devices for a group of "
                    + group.size());
        }
        return new ShardedWeights(layout, new Splitter(full, layout, group).split());
    }

    public ShardLayout layout() {
        return layout;
    }

    /** Rank {@code rank}'s weights, on its device. */
    public LlamaWeights rank(int rank) {
        return ranks.get(rank);
    }

    public int degree() {
        return ranks.size();
    }

    @Override
    public void close() {
        ranks.forEach(LlamaWeights::close);
    }

    /** Reads each weight once and hands every rank its slice. */
    private static final class Splitter {
        private final LlamaWeights full;
        private final ShardLayout s;
        private final DeviceGroup group;
        private final List<List<Tensor>> owned = new ArrayList<>();

        Splitter(LlamaWeights full, ShardLayout layout, DeviceGroup group) {
            this.full = full;
            this.s = layout;
            this.group = group;
            for (int r = 0; r < layout.degree(); r++) {
                owned.add(new ArrayList<>());
            }
        }

        List<LlamaWeights> split() {
            try {
                return build();
            } catch (RuntimeException e) {
                owned.forEach(o -> o.forEach(Tensor::close));
                throw e;
            }
        }

        private List<LlamaWeights> build() {
            ModelConfig c = full.config();
            int n = s.degree();
            long h = c.hiddenSize();
            Tensor[] embedding = replicated(full.embedding());
            List<List<LlamaLayerWeights>> layers = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                layers.add(new ArrayList<>());
            }
            long[] qkvBlocks = {c.qSize(), c.kvSize(), c.kvSize()};
            for (LlamaLayerWeights l : full.layers()) {
                Tensor[] qkv = rowBlocks(l.qkvWeight(), h, qkvBlocks, r -> new long[] {s.qSize() + 2L * s.kvSize(), h});
                Tensor[] bias = l.qkvBias() == null ? null
                        : rowBlocks(l.qkvBias(), 1, qkvBlocks, r -> new long[] {s.qSize() + 2L * s.kvSize()});
                Tensor[] o = columns(l.oWeight(), h, c.qSize(), s.qSize());
                Tensor[] gateUp = l.gateUpWeight() == null ? null : rowBlocks(l.gateUpWeight(), h,
                        new long[] {c.intermediateSize(), c.intermediateSize()}, r -> new long[] {2L * s.intermediate(), h});
                Tensor[] down = l.downWeight() == null ? null
                        : columns(l.downWeight(), h, c.intermediateSize(), s.intermediate());
                MoeLayerWeights[] moe = l.moe() == null ? null : experts(l.moe(), h);
                Tensor[] inputNorm = replicated(l.inputNorm());
                Tensor[] postNorm = replicated(l.postAttentionNorm());
                Tensor[] qNorm = replicated(l.qNorm());
                Tensor[] kNorm = replicated(l.kNorm());
                Tensor[] attnOutNorm = replicated(l.attentionOutputNorm());
                Tensor[] mlpOutNorm = replicated(l.mlpOutputNorm());
                for (int r = 0; r < n; r++) {
                    layers.get(r).add(new LlamaLayerWeights(inputNorm[r], qkv[r], bias == null ? null : bias[r], o[r],
                            postNorm[r], gateUp == null ? null : gateUp[r], down == null ? null : down[r],
                            qNorm == null ? null : qNorm[r], kNorm == null ? null : kNorm[r],
                            attnOutNorm == null ? null : attnOutNorm[r], mlpOutNorm == null ? null : mlpOutNorm[r],
                            moe == null ? null : moe[r], null));
                }
            }
            Tensor[] finalNorm = replicated(full.finalNorm());
            Tensor[] lmHead = each(full.lmHead(), r -> new long[] {s.vocabCount(r), h},
                    (v, r) -> WeightShards.rows(v, h, s.vocabFirst(r), s.vocabCount(r)));
            List<LlamaWeights> out = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                out.add(LlamaWeights.of(c, full.dtype(), embedding[r], layers.get(r), finalNorm[r], lmHead[r],
                        owned.get(r)));
            }
            return out;
        }

        private MoeLayerWeights[] experts(MoeLayerWeights w, long h) {
            long e = s.experts();
            long inter = w.down().dim(2);
            Tensor[] router = replicated(w.router());
            Tensor[] gateUp = each(w.gateUp(), r -> new long[] {e, 2 * inter, h},
                    (v, r) -> WeightShards.rows(v, h, s.expertFirst(r) * 2 * inter, e * 2 * inter));
            Tensor[] down = each(w.down(), r -> new long[] {e, h, inter},
                    (v, r) -> WeightShards.rows(v, inter, s.expertFirst(r) * h, e * h));
            Tensor[] sharedGateUp = null;
            Tensor[] sharedDown = null;
            if (w.shared() != null) {
                long width = w.shared().down().dim(1);
                sharedGateUp = rowBlocks(w.shared().gateUp(), h, new long[] {width, width},
                        r -> new long[] {2L * s.shared(), h});
                sharedDown = columns(w.shared().down(), h, width, s.shared());
            }
            MoeLayerWeights[] out = new MoeLayerWeights[s.degree()];
            for (int r = 0; r < out.length; r++) {
                out[r] = new MoeLayerWeights(router[r], gateUp[r], down[r], sharedGateUp == null ? null
                        : new MoeLayerWeights.SharedExperts(sharedGateUp[r], sharedDown[r]));
            }
            return out;
        }

        private Tensor[] replicated(Tensor t) {
            return t == null ? null : each(t, r -> t.shape(), (v, r) -> v);
        }

        private Tensor[] rowBlocks(Tensor t, long cols, long[] blockRows, IntFunction<long[]> shape) {
            return each(t, shape, (v, r) -> WeightShards.rowBlocks(v, cols, blockRows, r, s.degree()));
        }

        /** The row-parallel split of {@code t [rows, cols]}: {@code count} input columns a rank. */
        private Tensor[] columns(Tensor t, long rows, long cols, long count) {
            return each(t, r -> new long[] {rows, count}, (v, r) -> WeightShards.columns(v, rows, cols, r * count, count));
        }

        private interface Slicer {
            float[] slice(float[] full, int rank);
        }

        private Tensor[] each(Tensor t, IntFunction<long[]> shape, Slicer slicer) {
            if (t instanceof Fp8Weight) {
                throw new IllegalArgumentException("FP8 weights kept on the device are not sharded; load them in the"
                        + " activation dtype for tensor parallelism");
            }
            float[] v = t.device().toFloats(t);
            Tensor[] out = new Tensor[s.degree()];
            for (int r = 0; r < out.length; r++) {
                out[r] = group.device(r).fromFloats(slicer.slice(v, r), t.dtype(), shape.apply(r));
                owned.get(r).add(out[r]);
            }
            return out;
        }
    }
}
