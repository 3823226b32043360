package org.mstar.device.cuda;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Named scratch buffers of the ops (split-KV partials, fp32 GEMM accumulators, converted operands). They
 * only grow, and an outgrown buffer is kept until the device closes: a captured CUDA graph may still point
 * at it.
 */
final class Workspace implements AutoCloseable {
    private final DeviceAllocator allocator;
    private final Map<String, DeviceAllocator.Block> current = new HashMap<>();
    private final List<DeviceAllocator.Block> retired = new ArrayList<>();

    Workspace(DeviceAllocator allocator) {
        this.allocator = allocator;
    }

    /** A buffer of at least {@code bytes} for {@code name}; its contents are unspecified. */
    DeviceAllocator.Block get(String name, long bytes) {
        DeviceAllocator.Block b = current.get(name);
        if (b != null && b.bytes() >= bytes) {
            return b;
        }
        if (b != null) {
            retired.add(b);
        }
        DeviceAllocator.Block grown = allocator.allocate(Math.max(bytes, b == null ? 0 : 2 * b.bytes()), "workspace " + name);
        current.put(name, grown);
        return grown;
    }

    @Override
    public void close() {
        current.values().forEach(allocator::release);
        retired.forEach(allocator::release);
        current.clear();
        retired.clear();
    }
}
