package org.mstar.model.llama;

import org.mstar.device.AllReduce;
import org.mstar.device.Device;

/**
 * One rank's share of a forward: its device, its weights (the whole model's on a single device, its slices under
 * tensor parallelism), the layout that sizes its slices, its step inputs, and the all-reduce that sums the ranks'
 * partial outputs of the row-parallel projections (null on a single device, where there is nothing to sum).
 */
record RankContext(int rank, Device device, LlamaWeights weights, ShardLayout layout, RankInputs inputs,
                   AllReduce allReduce) {

    /** The single-device model: every head, column and expert, the resources read directly. */
    static RankContext single(LlamaModel model) {
        return new RankContext(0, model.device(), model.weights(), ShardLayout.of(model.config(), 1),
                RankInputs.of(model.resources()), null);
    }

    /** Replaces this rank's partial {@code t} with the sum over the ranks; nothing on a single device. */
    void sum(org.mstar.device.Tensor t) {
        if (allReduce != null) {
            allReduce.sum(rank, t);
        }
    }
}
