package org.mstar.engine;

/** Who runs next when rows, tokens or KV pages are scarce. */
public enum SchedulingPolicy {
    /** First come, first served: arrival order decides admission, rows and who is preempted last. */
    FCFS,
    /**
     * Strict priority (a request's {@code priority}, higher first) with aging: every
     * {@link SchedulerOptions#agingStep()} a request waits adds one level, so nothing starves; ties go by arrival.
     */
    PRIORITY
}
