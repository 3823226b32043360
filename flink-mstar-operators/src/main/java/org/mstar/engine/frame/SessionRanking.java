package org.mstar.engine.frame;

import java.io.Serializable;
import java.time.Duration;
import org.mstar.engine.SchedulingPolicy;

/**
 * How sessions waiting for a ring rank, as the engine core ranks requests ({@code org.mstar.engine.Ranking}):
 * arrival under {@link SchedulingPolicy#FCFS}; under {@link SchedulingPolicy#PRIORITY} an OPEN's priority, a level
 * worth {@code agingStep} of waiting ({@link Duration#ZERO}: strict priority), and a waiting session may take the ring
 * of the lowest-ranked resident session it outranks.
 */
public record SessionRanking(SchedulingPolicy policy, Duration agingStep) implements Serializable {
    /** Arrival order, no preemption: a session waits until a ring is free. */
    public static final SessionRanking FCFS = new SessionRanking(SchedulingPolicy.FCFS, Duration.ZERO);

    public SessionRanking {
        if (policy == null || agingStep == null || agingStep.isNegative()) {
            throw new IllegalArgumentException("a policy and an aging step >= 0 are required");
        }
    }
}
