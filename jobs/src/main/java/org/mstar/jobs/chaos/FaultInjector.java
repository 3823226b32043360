package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Applies a {@link FaultSchedule} to a {@link ChaosTarget}. After each fault it waits, on conditions, until the
 * target has recovered (serve says it runs again, and some response is committed after the fault, while requests
 * are open) before the next fault's seeded gap begins, so that each fault meets a working system.
 */
final class FaultInjector {
    private static final Duration START_TIMEOUT = Duration.ofMinutes(3);

    private final ChaosTarget target;
    private final CommittedResponses responses;
    private final BooleanSupplier requestsOpen;
    private final Duration recoveryBound;
    private final Timeline timeline;
    final Map<FaultSchedule.Kind, Integer> applied = new EnumMap<>(FaultSchedule.Kind.class);
    int unrecovered;

    FaultInjector(ChaosTarget target, CommittedResponses responses, BooleanSupplier requestsOpen,
                  Duration recoveryBound, Timeline timeline) {
        this.target = target;
        this.responses = responses;
        this.requestsOpen = requestsOpen;
        this.recoveryBound = recoveryBound;
        this.timeline = timeline;
    }

    /** Applies the faults in order until they are done or {@code untilNanos} (System.nanoTime) has passed. */
    void apply(List<FaultSchedule.Fault> schedule, long untilNanos) throws IOException, InterruptedException {
        for (FaultSchedule.Fault fault : schedule) {
            TimeUnit.MILLISECONDS.sleep(fault.gapMillis()); // the schedule's own seeded delay
            if (System.nanoTime() > untilNanos) {
                timeline.add("the load ended: " + (schedule.size() - schedule.indexOf(fault)) + " faults not applied");
                return;
            }
            apply(fault);
            applied.merge(fault.kind(), 1, Integer::sum);
            awaitProgress(responses.seen.size(), fault);
        }
    }

    private void apply(FaultSchedule.Fault fault) throws IOException, InterruptedException {
        switch (fault.kind()) {
            case SERVE_KILL -> {
                timeline.add("SIGKILL serve-" + target.serveStarts());
                target.serve().kill();
                restartServe();
            }
            case SERVE_FREEZE -> {
                timeline.add("SIGSTOP serve-" + target.serveStarts() + " for " + fault.lengthMillis() + " ms");
                target.serve().stop();
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                target.serve().resume();
                timeline.add("SIGCONT serve-" + target.serveStarts());
            }
            case BROKER_KILL -> {
                timeline.add("SIGKILL the broker, away for " + fault.lengthMillis() + " ms");
                target.killBroker();
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                target.startBroker();
                timeline.add("the broker is back");
            }
            case KILL_DURING_RESTORE -> {
                timeline.add("SIGKILL serve-" + target.serveStarts() + " (then again mid-restore)");
                target.serve().kill();
                MstarProcess restoring = target.startServe();
                restoring.awaitLine(ChaosTarget.RESUMING, START_TIMEOUT);
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                timeline.add("SIGKILL serve-" + target.serveStarts() + " " + fault.lengthMillis()
                        + " ms after it said it resumes" + (ranAlready(restoring) ? " (it was running already)" : ""));
                restoring.kill();
                restartServe();
            }
        }
    }

    private static boolean ranAlready(MstarProcess serve) throws IOException {
        return Files.readString(serve.log()).contains(ChaosTarget.SERVE_UP);
    }

    private void restartServe() throws IOException, InterruptedException {
        MstarProcess serve = target.startServe();
        serve.awaitLine(ChaosTarget.SERVE_UP, START_TIMEOUT);
        timeline.add("serve-" + target.serveStarts() + " runs again");
    }

    /** Waits until a response is read after the fault was applied, unless no request is open. */
    private void awaitProgress(int seenBefore, FaultSchedule.Fault fault) throws InterruptedException {
        long deadline = System.nanoTime() + recoveryBound.toNanos();
        while (responses.seen.size() == seenBefore && requestsOpen.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                unrecovered++;
                timeline.add("no response committed within " + recoveryBound + " after " + fault.kind());
                return;
            }
            TimeUnit.MILLISECONDS.sleep(100); // poll interval of a condition with a deadline
        }
    }
}
