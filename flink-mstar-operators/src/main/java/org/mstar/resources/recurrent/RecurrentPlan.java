package org.mstar.resources.recurrent;

import org.mstar.device.Tensor;

/**
 * One step's state addressing, what a Mamba2 layer's ops ({@code StateSpaceOps}) take: {@code slotIds} I32
 * {@code [rows]}, each segment's slot in segment order (0, the scratch, for a capture padding row), and
 * {@code starts} I32 {@code [rows + 1]}, each segment's first token in the step's token order, then the token count.
 *
 * @param fresh whether the tensors are this plan's own (freed with the next plan) rather than a graph's static buffers
 */
public record RecurrentPlan(Tensor slotIds, Tensor starts, boolean fresh) {
    void close() {
        if (fresh) {
            slotIds.close();
            starts.close();
        }
    }
}
