package org.mstar.resources.lora;

import org.mstar.device.Tensor;

/**
 * One step's adapter slots: I32 {@code [tokens]}, each planned token's slot (-1: the base model), or null when no
 * token of the step runs with an adapter (the forward then leaves the adapter ops out altogether).
 *
 * @param fresh whether the tensor is this plan's own (freed with the next plan) rather than a graph's static buffer
 */
public record AdapterPlan(Tensor slotIds, boolean fresh) {
    static final AdapterPlan NONE = new AdapterPlan(null, false);

    /** Whether some token of the step runs with an adapter. */
    public boolean active() {
        return slotIds != null;
    }

    /** The slots of the first {@code n} tokens; a view, valid until the next plan. */
    public Tensor firstSlots(long n) {
        if (slotIds == null) {
            throw new IllegalStateException("no token of this step runs with an adapter");
        }
        if (n > slotIds.dim(0)) {
            throw new IllegalArgumentException(n + " rows but " + slotIds.dim(0) + " planned adapter slots");
        }
        return n == slotIds.dim(0) ? slotIds : slotIds.rows(0, n);
    }

    void close() {
        if (fresh) {
            slotIds.close();
        }
    }
}
