package org.mstar.device;

/**
 * A GPU's memory as its driver reports it: every process's allocations count as used, this one's cached blocks
 * too (see {@link Device#releaseCachedMemory()}).
 */
public record DeviceMemory(long totalBytes, long freeBytes) {
    public DeviceMemory {
        if (totalBytes <= 0 || freeBytes < 0 || freeBytes > totalBytes) {
            throw new IllegalArgumentException("device memory: total " + totalBytes + ", free " + freeBytes);
        }
    }

    public long usedBytes() {
        return totalBytes - freeBytes;
    }
}
