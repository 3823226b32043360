package org.mstar.engine;

import java.time.Duration;

/**
 * How the {@link Scheduler} chooses.
 *
 * @param policy the order of admission, rows, resumes and preemption
 * @param agingStep under {@link SchedulingPolicy#PRIORITY}, waiting this long raises a request by one level;
 *                  {@link Duration#ZERO} turns aging off (strict priority may then starve low levels)
 * @param maxPrefillStall the longest a step that carries decodes may take because of the prefill chunks in it
 *                        (estimated from measured step times); {@link Duration#ZERO} leaves chunks bounded by
 *                        the token budget alone
 * @param minPrefillChunk the fewest prefill tokens a step with decodes still gives a prefill, so long prompts
 *                        keep progressing under the stall bound
 */
public record SchedulerOptions(SchedulingPolicy policy, Duration agingStep, Duration maxPrefillStall,
                               int minPrefillChunk) {
    /** Priority with one level of aging per second; prefill chunks bounded by the token budget only. */
    public static final SchedulerOptions DEFAULTS =
            new SchedulerOptions(SchedulingPolicy.PRIORITY, Duration.ofSeconds(1), Duration.ZERO, 16);

    public SchedulerOptions {
        if (policy == null) {
            throw new IllegalArgumentException("scheduling policy is required");
        }
        if (agingStep == null || agingStep.isNegative() || maxPrefillStall == null || maxPrefillStall.isNegative()) {
            throw new IllegalArgumentException("aging step and max prefill stall must be >= 0");
        }
        if (minPrefillChunk < 1) {
            throw new IllegalArgumentException("min prefill chunk must be >= 1, got " + minPrefillChunk);
        }
    }

    public SchedulerOptions withPolicy(SchedulingPolicy p) {
        return new SchedulerOptions(p, agingStep, maxPrefillStall, minPrefillChunk);
    }

    public SchedulerOptions withMaxPrefillStall(Duration stall) {
        return new SchedulerOptions(policy, agingStep, stall, minPrefillChunk);
    }
}
