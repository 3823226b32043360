package org.mstar.flink;

import java.time.Duration;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;

/**
 * Checkpoint settings for a generation job under load. When {@link GenerateOptions#MAX_WAITING} requests wait,
 * the generate operator runs engine steps before it takes the next record, so that Kafka consumption slows down;
 * an aligned barrier queued behind a burst of requests then waits until the operator has taken all of them —
 * seconds for a burst of a thousand — and, under exactly-once, no token becomes readable meanwhile. A checkpoint
 * that starts aligned turns unaligned once its barrier is late by {@link #ALIGNED_TIMEOUT}: it overtakes the
 * queued requests, which the checkpoint keeps as in-flight data and a restore replays.
 */
@PublicEvolving
public final class BackpressureCheckpoints {
    /** How late a barrier may be before its checkpoint stops waiting for the records ahead of it. */
    public static final Duration ALIGNED_TIMEOUT = Duration.ofMillis(100);

    private BackpressureCheckpoints() {}

    /** Turns on unaligned checkpoints after {@link #ALIGNED_TIMEOUT}, unless {@code conf} set either already. */
    public static Configuration applyTo(Configuration conf) {
        if (!conf.contains(CheckpointingOptions.ENABLE_UNALIGNED)) {
            conf.set(CheckpointingOptions.ENABLE_UNALIGNED, true);
        }
        if (!conf.contains(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT)) {
            conf.set(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT, ALIGNED_TIMEOUT);
        }
        return conf;
    }
}
