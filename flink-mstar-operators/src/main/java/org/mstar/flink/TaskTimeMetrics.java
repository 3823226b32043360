package org.mstar.flink;

import java.util.function.LongSupplier;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.util.function.ThrowingRunnable;

/**
 * Where an engine operator's task thread spends its time while the engine has work, as metrics of group
 * {@code mstar}, so that a benchmark (or a user's dashboard) can tell a job's time beyond the engine's apart: the
 * engine's steps, emitting their results, what the thread does between two steps (records, checkpoint barriers,
 * waiting for output buffers, timers), and the barriers' own work. Counted per step and per barrier, never per token.
 *
 * <p>Counters (microseconds, cumulative): {@code steps}, {@code engineStepMicros} (inside the engine's step),
 * {@code emitMicros} (the rest of a step: emitting its responses and ending finished requests),
 * {@code betweenStepsMicros} (from a step's end to the next step's start while the engine still had work),
 * {@code barriers} and {@code preBarrierMicros} (saving the live requests to keyed state before a barrier).
 *
 * <p>Gauges (epoch milliseconds, 0 before the first): {@code busySinceMillis}, when a request arrived while none
 * was live (the start of a burst, or of an offline load); {@code firstStepMillis}, when the first step after that
 * began; {@code lastArrivalMillis}; {@code lastTokenMillis}, when the last step that generated tokens had emitted
 * them; and {@code longestBetweenStepsMicros}, the longest time between two steps since {@code busySinceMillis}.
 * Gauges are read on the metric reporters' threads: the fields they read are volatile.
 */
final class TaskTimeMetrics {
    private final LongSupplier nanoClock;
    private final LongSupplier epochMillis;
    private final Counter steps;
    private final Counter engineStepMicros;
    private final Counter emitMicros;
    private final Counter betweenStepsMicros;
    private final Counter barriers;
    private final Counter preBarrierMicros;
    private volatile long busySinceMillis;
    private volatile long firstStepMillis;
    private volatile long lastArrivalMillis;
    private volatile long lastTokenMillis;
    private volatile long longestBetweenStepsMicros;
    /** Whether the next step is the first since {@link #busySinceMillis}. */
    private boolean awaitingFirstStep;
    /** nanoClock at the end of the last step when the engine had work after it, else -1 (idle: no gap to count). */
    private long workPendingSince = -1;
    private long stepStart;
    private long engineDone;

    TaskTimeMetrics(MetricGroup mstarGroup) {
        this(mstarGroup, System::nanoTime, System::currentTimeMillis);
    }

    TaskTimeMetrics(MetricGroup mstarGroup, LongSupplier nanoClock, LongSupplier epochMillis) {
        this.nanoClock = nanoClock;
        this.epochMillis = epochMillis;
        steps = mstarGroup.counter("steps");
        engineStepMicros = mstarGroup.counter("engineStepMicros");
        emitMicros = mstarGroup.counter("emitMicros");
        betweenStepsMicros = mstarGroup.counter("betweenStepsMicros");
        barriers = mstarGroup.counter("barriers");
        preBarrierMicros = mstarGroup.counter("preBarrierMicros");
        mstarGroup.gauge("busySinceMillis", (Gauge<Long>) () -> busySinceMillis);
        mstarGroup.gauge("firstStepMillis", (Gauge<Long>) () -> firstStepMillis);
        mstarGroup.gauge("lastArrivalMillis", (Gauge<Long>) () -> lastArrivalMillis);
        mstarGroup.gauge("lastTokenMillis", (Gauge<Long>) () -> lastTokenMillis);
        mstarGroup.gauge("longestBetweenStepsMicros", (Gauge<Long>) () -> longestBetweenStepsMicros);
    }

    /** A request was admitted; {@code noneLive} when it is the only live one. */
    void arrived(boolean noneLive) {
        long now = epochMillis.getAsLong();
        if (noneLive) {
            busySinceMillis = now;
            longestBetweenStepsMicros = 0;
            awaitingFirstStep = true;
        }
        lastArrivalMillis = now;
    }

    void stepStarted() {
        stepStart = nanoClock.getAsLong();
        if (workPendingSince >= 0) {
            long gap = (stepStart - workPendingSince) / 1000;
            betweenStepsMicros.inc(gap);
            if (gap > longestBetweenStepsMicros) {
                longestBetweenStepsMicros = gap;
            }
        }
        if (awaitingFirstStep) {
            awaitingFirstStep = false;
            firstStepMillis = epochMillis.getAsLong();
        }
    }

    /** The engine's step returned; what follows is emitting its results. */
    void engineStepped() {
        engineDone = nanoClock.getAsLong();
        engineStepMicros.inc((engineDone - stepStart) / 1000);
    }

    /**
     * @param tokens tokens the step generated (and were emitted)
     * @param workLeft whether the engine has work after it: then the time until the next step counts as between steps
     */
    void stepEnded(int tokens, boolean workLeft) {
        long end = nanoClock.getAsLong();
        steps.inc();
        emitMicros.inc((end - engineDone) / 1000);
        if (tokens > 0) {
            lastTokenMillis = epochMillis.getAsLong();
        }
        workPendingSince = workLeft ? end : -1;
    }

    /** Runs {@code save}, what the operator does before a checkpoint barrier passes it, and counts its time. */
    void atBarrier(ThrowingRunnable<Exception> save) throws Exception {
        long start = nanoClock.getAsLong();
        save.run();
        barriers.inc();
        preBarrierMicros.inc((nanoClock.getAsLong() - start) / 1000);
    }
}
