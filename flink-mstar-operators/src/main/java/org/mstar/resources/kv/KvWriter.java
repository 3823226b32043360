package org.mstar.resources.kv;

import org.mstar.device.Tensor;

/** Stores one layer's K and V for a step's new tokens at addresses {@link KVManager} planned. */
@FunctionalInterface
public interface KvWriter {
    /**
     * @param pool    the device pool, {@code [layers, pages, 2, pageSize, kvHeads, headDim]} (one plane of latent rows
     *                for the MLA layout)
     * @param pageIdx I32 {@code [n]}: token i's page
     * @param offsets I32 {@code [n]}: token i's slot in its page
     */
    void write(Tensor pool, int layer, Tensor pageIdx, Tensor offsets);
}
