package org.mstar.device;

/** Ints on their way from the device to the host ({@link Device#readIntsLater}). */
@FunctionalInterface
public interface PendingInts {
    /** The values; waits for their copy the first time if it has not finished. */
    int[] get();
}
