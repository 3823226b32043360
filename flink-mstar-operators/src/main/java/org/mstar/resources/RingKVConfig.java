package org.mstar.resources;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A fixed horizon of frame slots per layer, overwritten in place; storage is allocated once and
 * reused for the life of the process.
 */
public final class RingKVConfig extends KVConfig {
    /** Flex attention's sparse block size; frames are whole blocks. */
    public static final int BLOCK = 128;

    private final int tokensPerFrame;
    private final List<RingKVLayerConfig> layers;
    private int numSessions;

    public RingKVConfig(int numLayers, int numKvHeads, int headDim, Integer numQoHeads, int tokensPerFrame,
                        List<RingKVLayerConfig> layers, int numSessions) {
        super(numLayers, numKvHeads, headDim, numQoHeads);
        if (tokensPerFrame <= 0 || tokensPerFrame % BLOCK != 0) {
            throw new IllegalArgumentException("tokens_per_frame must be a positive multiple of " + BLOCK + ", got " + tokensPerFrame);
        }
        if (layers.size() != numLayers) {
            throw new IllegalArgumentException("layers has " + layers.size() + " entries, num_layers is " + numLayers);
        }
        if (numSessions < 1) throw new IllegalArgumentException("num_sessions must be >= 1, got " + numSessions);
        this.tokensPerFrame = tokensPerFrame;
        this.layers = List.copyOf(layers);
        this.numSessions = numSessions;
    }

    public int tokensPerFrame() { return tokensPerFrame; }
    public List<RingKVLayerConfig> layers() { return layers; }
    public int numSessions() { return numSessions; }

    /** Resident sessions plus one shared scratch session that padding rows park on. */
    public int totalSessions() { return numSessions + 1; }

    /** {@code num_sessions} only: nothing else here is a deployment knob. */
    @Override
    public void applyYamlOverrides(Map<String, Object> o) {
        YamlValues.refuseUnknown("RingKVConfig", o, Set.of("num_sessions"));
        if (o.containsKey("num_sessions")) {
            int n = YamlValues.asInt("num_sessions", o.get("num_sessions"));
            if (n < 1) throw new IllegalArgumentException("num_sessions must be >= 1, got " + n);
            numSessions = n;
        }
    }
}
