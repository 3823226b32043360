package org.mstar.engine;

import java.util.EnumMap;
import java.util.Map;

/**
 * Host time an engine spends per step, split into phases, so harnesses can show which part pre-planning hides
 * (see {@link EngineOptions#preplan()}). A stopwatch the step loop advances at each phase boundary: one
 * {@link System#nanoTime} per boundary, so it stays on.
 */
public final class StepTimings {
    /** The phases of a step, in the order a step passes them (commit and pre-plan run between launch and wait). */
    public enum Phase {
        /** Imports, resumes, preemptions, the scheduler's rows and the step built from them. */
        SCHEDULE,
        /** The resources' admit and plan (a promoted pre-plan makes both cheap). */
        ADMIT_PLAN,
        /**
         * Enqueuing the forward (one graph replay for a decode-graph step, every kernel for an eager one) and the draw
         * of its tokens.
         */
        LAUNCH,
        /**
         * The resources' commit of what the enqueued forward consumed (all but the sampler): overlapped with the
         * device, so apart from {@link #ACCEPT}, which the device waits for.
         */
        COMMIT,
        /** Planning the next step ahead, while the device runs this one. */
        PREPLAN,
        /** The host waits here until the step's tokens are on the host (a step launched ahead may be running). */
        WAIT,
        /** Once the tokens are on the host: the sampler's commit and the tokens' stop rules, detokenizing and outputs. */
        ACCEPT
    }

    /** Told at the end of each phase, on the step loop's thread: e.g. to record a device event there. */
    @FunctionalInterface
    public interface Listener {
        void ended(Phase phase);
    }

    private final long[] nanos = new long[Phase.values().length];
    private long steps;
    private long mark = System.nanoTime();
    private Listener listener;

    /** Starts the stopwatch for a step's first phase. */
    void begin() {
        mark = System.nanoTime();
    }

    /** Adds the time since the last boundary to {@code phase}; the next phase starts now. */
    void end(Phase phase) {
        long now = System.nanoTime();
        nanos[phase.ordinal()] += now - mark;
        mark = now;
        if (listener != null) {
            listener.ended(phase);
        }
    }

    /** Counts a step that ran (a step() that only scheduled adds its time to the next). */
    void stepRan() {
        steps++;
    }

    public long steps() {
        return steps;
    }

    /** Mean milliseconds per step of {@code phase} since the last {@link #reset}. */
    public double millisPerStep(Phase phase) {
        return steps == 0 ? 0 : nanos[phase.ordinal()] / 1e6 / steps;
    }

    /** Mean milliseconds per step of every phase. */
    public Map<Phase, Double> millisPerStep() {
        Map<Phase, Double> all = new EnumMap<>(Phase.class);
        for (Phase p : Phase.values()) {
            all.put(p, millisPerStep(p));
        }
        return all;
    }

    /** Forget the steps so far (e.g. warm-up). */
    public void reset() {
        java.util.Arrays.fill(nanos, 0);
        steps = 0;
    }

    /** {@code listener} (null: none) hears every phase end from now on. */
    public void listen(Listener listener) {
        this.listener = listener;
    }
}
