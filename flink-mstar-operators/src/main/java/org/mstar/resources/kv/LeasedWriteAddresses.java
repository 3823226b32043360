package org.mstar.resources.kv;

import java.util.Arrays;
import org.mstar.device.Device;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.BucketKey;
import org.mstar.resources.SlotLease;

/**
 * KV write addresses (page, offset per new token) of leased steps, in static buffers of (bucket, slot,
 * plan label) sized for the bucket's tokens: a captured graph appends through them on every replay.
 * Entries past the step's tokens are neutralised to (sink page, 0), so stale addresses of an earlier step
 * never scatter into another request's pages.
 */
final class LeasedWriteAddresses implements AutoCloseable {
    private final StaticIntBuffers buffers;

    LeasedWriteAddresses(Device device) {
        this.buffers = new StaticIntBuffers(device);
    }

    /** Writes {@code out}'s addresses into the lease's buffers; returns the whole buffers {pages, offsets}. */
    Tensor[] write(SlotLease lease, KVPlanOutput out) {
        int capacity = lease.bucket().numTokens();
        int n = out.writePages().length;
        if (n > capacity) {
            throw new IllegalStateException("plan label '" + out.planLabel() + "' writes " + n + " tokens, bucket "
                    + lease.bucket() + " holds " + capacity);
        }
        int[] pages = Arrays.copyOf(out.writePages(), capacity);
        Arrays.fill(pages, n, capacity, PageArena.SINK_PAGE);
        int[] offsets = Arrays.copyOf(out.writeOffsets(), capacity);
        Tensor p = buffers.write(new Key(lease.bucket(), lease.slot(), out.planLabel(), "pages"), capacity, pages);
        Tensor o = buffers.write(new Key(lease.bucket(), lease.slot(), out.planLabel(), "offsets"), capacity, offsets);
        return new Tensor[] {p, o};
    }

    @Override
    public void close() {
        buffers.close();
    }

    private record Key(BucketKey bucket, int slot, String planLabel, String part) {}
}
