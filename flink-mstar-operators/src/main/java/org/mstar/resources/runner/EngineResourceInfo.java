package org.mstar.resources.runner;

import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.resources.NodeResourceSpec;

import java.util.Map;
import java.util.Objects;

/**
 * What a worker hands a {@link ResourceBuilder} besides the spec.
 *
 * @param device              the device the resource allocates on; null only in tests of host-side logic
 * @param worldSize           ranks in the node's joint TP×SP group
 * @param rank                this worker's rank in that group
 * @param kvDType             the element type of KV storage
 * @param needsRemoteTransfer whether a consumer of this resource lives on another worker
 * @param dependencies        the specs named in the spec's {@code dependsOn}, by key
 */
public record EngineResourceInfo(Device device, int worldSize, int rank, DType kvDType,
                                 boolean needsRemoteTransfer, Map<String, NodeResourceSpec> dependencies) {
    public EngineResourceInfo {
        if (worldSize < 1) {
            throw new IllegalArgumentException("worldSize must be >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank must be in [0, " + worldSize + "), got " + rank);
        }
        Objects.requireNonNull(kvDType, "kvDType");
        dependencies = Map.copyOf(dependencies);
    }

    /** One rank, nothing remote, no dependencies: a single-GPU worker, or a test. */
    public static EngineResourceInfo singleRank(Device device, DType kvDType) {
        return new EngineResourceInfo(device, 1, 0, kvDType, false, Map.of());
    }

    /** This worker's info for one spec: the same device and group, that spec's dependencies and transfer need. */
    public EngineResourceInfo forSpec(Map<String, NodeResourceSpec> specDependencies, boolean remoteTransfer) {
        return new EngineResourceInfo(device, worldSize, rank, kvDType, remoteTransfer, specDependencies);
    }
}
