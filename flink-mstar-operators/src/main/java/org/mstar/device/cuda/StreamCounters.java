package org.mstar.device.cuda;

/**
 * What the host asked of one device's stream: kernel and cuBLAS launches, host uploads, driver
 * allocations, and stream synchronisations with the wall time the host spent blocked in them. A decode
 * step's wall time minus that blocked time is host work the GPU may have waited on; the counts show
 * which calls a step repeats. Plain counters, read by harnesses as {@link Snapshot} differences.
 */
public final class StreamCounters {
    /** Counts at one moment; {@link #minus} gives what happened between two. */
    public record Snapshot(long launches, long gemms, long uploads, long uploadBytes, long driverAllocs, long syncs,
                           long syncNanos) {
        public Snapshot minus(Snapshot earlier) {
            return new Snapshot(launches - earlier.launches, gemms - earlier.gemms, uploads - earlier.uploads,
                    uploadBytes - earlier.uploadBytes, driverAllocs - earlier.driverAllocs, syncs - earlier.syncs,
                    syncNanos - earlier.syncNanos);
        }
    }

    private long launches;
    private long gemms;
    private long uploads;
    private long uploadBytes;
    private long driverAllocs;
    private long syncs;
    private long syncNanos;

    void launch() {
        launches++;
    }

    void gemm() {
        gemms++;
    }

    void upload(long bytes) {
        uploads++;
        uploadBytes += bytes;
    }

    void driverAlloc() {
        driverAllocs++;
    }

    void sync(long nanos) {
        syncs++;
        syncNanos += nanos;
    }

    public Snapshot snapshot() {
        return new Snapshot(launches, gemms, uploads, uploadBytes, driverAllocs, syncs, syncNanos);
    }
}
