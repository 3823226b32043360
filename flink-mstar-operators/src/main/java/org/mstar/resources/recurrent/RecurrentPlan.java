package org.mstar.resources.recurrent;

import org.mstar.device.Tensor;

/**
 * One step's state addressing: I32 {@code [rows]}, each segment's slot in segment order (0, the scratch, for a
 * capture padding row), the index a Mamba2 layer reads and updates its row's state at.
 *
 * @param fresh whether the tensor is this plan's own (freed with the next plan) rather than a graph's static buffer
 */
public record RecurrentPlan(Tensor slotIds, boolean fresh) {
    void close() {
        if (fresh) {
            slotIds.close();
        }
    }
}
