package org.mstar.engine;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.function.ToIntFunction;
import java.util.function.ToLongFunction;

/**
 * The order in which an engine ranks whatever competes for its capacity, and whom a waiting head preempts: the
 * {@link Scheduler}'s generation requests competing for rows and KV pages, and frame sessions competing for rings
 * (docs/guides/frames.md). One ranking for both, so a policy and its aging mean the same everywhere.
 *
 * <p>Under {@link SchedulingPolicy#FCFS} arrival decides; under {@link SchedulingPolicy#PRIORITY} with aging a
 * priority level is worth {@code agingStep} of waiting ({@link SchedulerOptions#agingStep()}), so a competitor
 * ranks as if it had arrived {@code priority × agingStep} earlier; without aging, priority first, then arrival.
 * The order of two competitors never changes while both live, so nothing flaps between them.
 *
 * @param <T> what competes
 */
public final class Ranking<T> {
    private final SchedulingPolicy policy;
    private final Comparator<T> order;

    /**
     * @param agingStep under {@link SchedulingPolicy#PRIORITY}, the waiting a priority level is worth;
     *                  {@link Duration#ZERO} for strict priority
     * @param arrivalNanos when a competitor arrived ({@link System#nanoTime()} scale)
     * @param priority its priority, higher first
     */
    public Ranking(SchedulingPolicy policy, Duration agingStep, ToLongFunction<T> arrivalNanos,
                   ToIntFunction<T> priority) {
        this.policy = policy;
        Comparator<T> byArrival = Comparator.comparingLong(arrivalNanos);
        if (policy == SchedulingPolicy.FCFS) {
            this.order = byArrival;
        } else if (agingStep.isZero()) {
            this.order = Comparator.comparingInt((T t) -> -priority.applyAsInt(t)).thenComparing(byArrival);
        } else {
            long step = agingStep.toNanos();
            this.order = Comparator.comparingLong((T t) -> virtualArrival(arrivalNanos.applyAsLong(t),
                    priority.applyAsInt(t), step)).thenComparing(byArrival);
        }
    }

    /** Best first. */
    public Comparator<T> order() {
        return order;
    }

    /** Whether a waiting competitor may preempt a running one: only under {@link SchedulingPolicy#PRIORITY}. */
    public boolean preempts() {
        return policy == SchedulingPolicy.PRIORITY;
    }

    /**
     * Running competitors to preempt so that {@code head} can start: the lowest-ranked first, only those
     * {@code head} outranks, until the capacity available reaches {@code need}; none when it never would, and none
     * unless {@link #preempts()}.
     *
     * @param available capacity free now
     * @param held the capacity a running competitor gives back when preempted
     */
    public List<T> victims(T head, Collection<T> running, int available, int need, ToIntFunction<T> held) {
        if (!preempts()) {
            return List.of();
        }
        List<T> byRankLowestFirst = new ArrayList<>(running);
        byRankLowestFirst.sort(order.reversed());
        List<T> victims = new ArrayList<>();
        int freed = available;
        for (T r : byRankLowestFirst) {
            if (freed >= need || order.compare(r, head) <= 0) {
                break;
            }
            victims.add(r);
            freed += held.applyAsInt(r);
        }
        return freed >= need ? victims : List.of();
    }

    private static long virtualArrival(long arrivalNanos, int priority, long agingStep) {
        try {
            return Math.subtractExact(arrivalNanos, Math.multiplyExact((long) priority, agingStep));
        } catch (ArithmeticException e) {
            return priority > 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
    }
}
