package org.mstar.resources.attn;

import org.mstar.device.Device;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.BucketKey;
import org.mstar.resources.SlotLease;

/**
 * Puts one I32 array of a plan label on the device: {@code part} names it within its label; {@code capacity} bounds
 * a static buffer.
 */
@FunctionalInterface
interface PlanUpload {
    Tensor apply(String part, int capacity, int[] values);

    /** Whether uploads under {@code lease} go to static buffers: a lease with a captured bucket. */
    static boolean leased(SlotLease lease) {
        return lease != null && lease.bucket() != null;
    }

    /**
     * Leased: the static buffer of ({@code scope}, bucket, slot, label, part), overwritten in place so a captured
     * replay reads this step's values; {@code scope} keeps one plan kind's buffers apart from another's. Eager:
     * a fresh tensor of exactly the values' size.
     */
    static PlanUpload of(String scope, String label, Device device, SlotLease lease, StaticIntBuffers statics) {
        return leased(lease)
                ? (part, capacity, values) -> statics.write(
                        new LeasedKey(scope, lease.bucket(), lease.slot(), label, part), capacity, values)
                : (part, capacity, values) -> device.fromInts(values, values.length);
    }

    record LeasedKey(String scope, BucketKey bucket, int slot, String planLabel, String part) {}
}
