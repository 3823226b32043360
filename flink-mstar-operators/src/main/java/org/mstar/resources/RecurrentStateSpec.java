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
 * <p>With {@link #withSnapshots} the prefix cache keeps snapshots of whole states, one every {@code snapshotInterval}
 * tokens of a prompt, in {@code snapshotSlots} more device places after the requests' slots.
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
    private int snapshotSlots;
    private int snapshotInterval;
    private int pageSize;

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

    /**
     * Keep state snapshots for the prefix cache.
     *
     * @param slots    snapshots kept at most (device places after the requests' slots), at least 1
     * @param interval tokens between snapshots of a prompt, a multiple of {@code pageSize}
     * @param pageSize tokens per page of the KV prefix cache, whose key of the page ending at a snapshot keys it
     * @return this spec
     */
    public RecurrentStateSpec withSnapshots(int slots, int interval, int pageSize) {
        if (slots < 1 || pageSize < 1 || interval < pageSize || interval % pageSize != 0) {
            throw new IllegalArgumentException("recurrent state '" + resourceKey + "': snapshots need slots >= 1 and"
                    + " an interval that is a multiple of the page size (asked: " + slots + " slots every "
                    + interval + " tokens, pages of " + pageSize + ")");
        }
        this.snapshotSlots = slots;
        this.snapshotInterval = interval;
        this.pageSize = pageSize;
        return this;
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

    /** Snapshot places of the prefix cache; 0 without {@link #withSnapshots}. */
    public int snapshotSlots() {
        return snapshotSlots;
    }

    /** Tokens between a prompt's snapshots; 0 without {@link #withSnapshots}. */
    public int snapshotInterval() {
        return snapshotInterval;
    }

    /** Tokens per page of the KV prefix cache whose keys key the snapshots; 0 without {@link #withSnapshots}. */
    public int pageSize() {
        return pageSize;
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
