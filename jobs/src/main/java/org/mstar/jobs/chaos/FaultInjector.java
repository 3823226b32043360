package org.mstar.jobs.chaos;

import java.io.IOException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Applies a {@link FaultSchedule}: the broker's and the state disk's faults itself, the job's processes' through
 * {@link ChaosJob}. After a fault it waits, on conditions, until the job has recovered (a response committed after
 * the fault, while requests are open) before the next fault's seeded gap begins, so that the fault meets a working
 * system; after one that overlaps the next it does not wait, so that the next lands mid-recovery.
 */
final class FaultInjector {
    private final ChaosBroker broker;
    private final ChaosJob job;
    private final Optional<StateDisk> disk;
    private final CommittedResponses responses;
    private final BooleanSupplier requestsOpen;
    private final Duration recoveryBound;
    private final Timeline timeline;
    final Map<FaultSchedule.Kind, Integer> applied = new EnumMap<>(FaultSchedule.Kind.class);
    int unrecovered;
    /**
     * Faults of each kind after which the job that ran had failed over (its REST API recorded a task failure since
     * the fault began), where the fault left that job alive; kills are failovers anyway.
     */
    final Map<FaultSchedule.Kind, Integer> failedOver = new EnumMap<>(FaultSchedule.Kind.class);
    /** When the last fault was over: its processes started again, the broker back, the disk freed. */
    long lastFaultOverMillis;

    FaultInjector(ChaosBroker broker, ChaosJob job, Optional<StateDisk> disk, CommittedResponses responses,
                  BooleanSupplier requestsOpen, Duration recoveryBound, Timeline timeline) {
        this.broker = broker;
        this.job = job;
        this.disk = disk;
        this.responses = responses;
        this.requestsOpen = requestsOpen;
        this.recoveryBound = recoveryBound;
        this.timeline = timeline;
    }

    /** Applies the faults in order until they are done or {@code faultTime} has passed. */
    void apply(List<FaultSchedule.Fault> schedule, Duration faultTime) throws Exception {
        long start = System.nanoTime();
        for (FaultSchedule.Fault fault : schedule) {
            TimeUnit.MILLISECONDS.sleep(fault.gapMillis()); // the schedule's own seeded delay
            if (System.nanoTime() - start > faultTime.toNanos()) {
                timeline.add("the time for faults is over: " + (schedule.size() - schedule.indexOf(fault))
                        + " faults not applied");
                return;
            }
            job.restartWhatExited();
            int seenBefore = responses.seen.size();
            long began = System.currentTimeMillis();
            apply(fault);
            applied.merge(fault.kind(), 1, Integer::sum);
            lastFaultOverMillis = System.currentTimeMillis();
            if (!fault.overlaps()) {
                awaitProgress(seenBefore, fault);
            }
            noteFailover(fault, began);
        }
    }

    private void apply(FaultSchedule.Fault fault) throws Exception {
        switch (fault.kind()) {
            case BROKER_KILL, BROKER_OUTAGE -> {
                timeline.add("SIGKILL the broker, away for " + fault.lengthMillis() + " ms"
                        + (fault.kind() == FaultSchedule.Kind.BROKER_OUTAGE ? " (longer than serve's Kafka timeouts)" : ""));
                broker.process().kill();
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                startBroker();
            }
            case BROKER_FREEZE -> {
                timeline.add("SIGSTOP the broker for " + fault.lengthMillis() + " ms");
                broker.process().stop();
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                broker.process().resume();
                timeline.add("SIGCONT the broker");
            }
            case BROKER_RESTART -> {
                timeline.add("SIGTERM the broker (a clean shutdown), then start it again");
                broker.process().terminate();
                startBroker();
            }
            case DISK_FULL -> {
                StateDisk full = disk.orElseThrow();
                long bytes = full.fill();
                timeline.add("the state directory's disk is full (" + (bytes >> 20) + " MiB written), held for "
                        + fault.lengthMillis() + " ms");
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                full.free();
                timeline.add("the state directory's disk has space again");
            }
            default -> job.apply(fault);
        }
    }

    private void startBroker() throws IOException, InterruptedException {
        broker.start();
        timeline.add("the broker is back");
    }

    /** Waits until a response is read after the fault was applied, unless no request is open. */
    private void awaitProgress(int seenBefore, FaultSchedule.Fault fault) throws Exception {
        long deadline = System.nanoTime() + recoveryBound.toNanos();
        while (responses.seen.size() == seenBefore && requestsOpen.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                unrecovered++;
                timeline.add("no response committed within " + recoveryBound + " after " + fault.kind());
                return;
            }
            job.restartWhatExited();
            TimeUnit.MILLISECONDS.sleep(100); // poll interval of a condition with a deadline
        }
    }

    private void noteFailover(FaultSchedule.Fault fault, long began) throws InterruptedException {
        OptionalInt failures = job.rest().failuresSince(began);
        if (failures.isPresent() && failures.getAsInt() > 0) {
            failedOver.merge(fault.kind(), 1, Integer::sum);
            timeline.add("the job failed over: " + failures.getAsInt() + " task failures since " + fault.kind()
                    + " began");
        }
    }
}
