package org.mstar.resources;

import java.util.List;

/**
 * The low-rank adapters (LoRA) a model serves, each under a name a request gives: what their weights target, how
 * large a slot holding any of them must be, and each one's weights read from host storage when a slot takes it. The
 * model layer reads them (PEFT's folder layout); the adapter resource keeps them on the device.
 */
public interface AdapterLibrary {

    /** Every adapter's name, sorted. */
    List<String> names();

    default boolean contains(String name) {
        return names().contains(name);
    }

    /** The projections any adapter targets, each with its shape: what one slot holds per layer. */
    List<AdapterTarget> targets();

    /** Decoder layers: every adapter holds each of its targets in every layer. */
    int layers();

    /** The largest rank of any adapter: a slot holds that rank, lower ones padded with zeros (which add nothing). */
    int maxRank();

    /**
     * What {@code name}'s weights are (a digest of its files): KV computed under one adapter's weights is never taken
     * for another's, nor for the same name after its files changed.
     */
    byte[] identity(String name);

    /**
     * {@code name}'s weights, read from host storage.
     *
     * @throws java.io.UncheckedIOException when its files cannot be read
     */
    AdapterWeights load(String name);
}
