package org.mstar.resources;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Declares the per-request recurrent state of a model's Mamba2 layers: for every request, one fixed-size state per
 * {@link RecurrentLayer}, whatever the request's length, in {@code slots} device places of which slot 0 is the
 * scratch that capture padding rows read and write, so at most {@code slots - 1} requests hold a state at once.
 * {@code hostSlots} states of preempted requests may wait in host memory (0: none, the resource cannot offload).
 *
 * <p>The geometry is the checkpoint's; {@code slots} and {@code host_slots} are this deployment's (YAML).
 *
 * @see RecurrentStep
 */
public final class RecurrentStateSpec implements NodeResourceSpec {
    private static final Set<String> TUNABLES = Set.of("slots", "host_slots");

    private final String resourceKey;
    private final Set<String> nodes;
    private final String label;
    private final List<RecurrentLayer> layers;
    private final StateDType ssmDType;
    private final StateDType convDType;
    private int slots;
    private int hostSlots;

    /** @param label the segment label of the rows that feed the state */
    public RecurrentStateSpec(String resourceKey, Set<String> nodes, String label, List<RecurrentLayer> layers,
                              StateDType ssmDType, StateDType convDType, int slots, int hostSlots) {
        this.resourceKey = resourceKey;
        this.nodes = Set.copyOf(nodes);
        this.label = label;
        this.layers = List.copyOf(layers);
        this.ssmDType = ssmDType;
        this.convDType = convDType;
        this.slots = slots;
        this.hostSlots = hostSlots;
        if (this.layers.isEmpty()) {
            throw new IllegalArgumentException("recurrent state '" + resourceKey + "' declares no layer");
        }
        Set<Integer> seen = new HashSet<>();
        for (RecurrentLayer l : this.layers) {
            if (!seen.add(l.layer())) {
                throw new IllegalArgumentException("recurrent state '" + resourceKey + "' declares layer "
                        + l.layer() + " twice");
            }
        }
        check();
    }

    private void check() {
        if (slots < 2) {
            throw new IllegalArgumentException("recurrent state '" + resourceKey + "': slots must be >= 2 (slot 0 is"
                    + " the padding rows' scratch), got " + slots);
        }
        if (hostSlots < 0) {
            throw new IllegalArgumentException("recurrent state '" + resourceKey + "': host_slots must be >= 0, got "
                    + hostSlots);
        }
    }

    @Override
    public String resourceKey() {
        return resourceKey;
    }

    @Override
    public Set<String> nodes() {
        return nodes;
    }

    public String label() {
        return label;
    }

    /** The recurrent layers, in declared order: the order of every per-layer tensor and of the published bytes. */
    public List<RecurrentLayer> layers() {
        return layers;
    }

    public StateDType ssmDType() {
        return ssmDType;
    }

    public StateDType convDType() {
        return convDType;
    }

    /** Device places, the scratch slot 0 included. */
    public int slots() {
        return slots;
    }

    /** Offloaded states host memory holds at most. */
    public int hostSlots() {
        return hostSlots;
    }

    /** Bytes of one request's state over every layer. */
    public long stateBytes() {
        return layers.stream().mapToLong(l -> l.ssmElements() * ssmDType.bytes() + l.convElements()
                * convDType.bytes()).sum();
    }

    @Override
    public void applyYamlOverrides(Map<String, Object> o) {
        YamlValues.refuseUnknown("RecurrentStateSpec '" + resourceKey + "'", o, TUNABLES);
        if (o.containsKey("slots")) slots = YamlValues.asInt("slots", o.get("slots"));
        if (o.containsKey("host_slots")) hostSlots = YamlValues.asInt("host_slots", o.get("host_slots"));
        check();
    }
}
