package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code mstar serve --random} as a child process, the job's only one, restarted with the same command on the same
 * state directory.
 */
final class ServeUnderChaos implements ChaosJob {
    static final String SERVE_UP = "mstar serve is running:";
    static final String RESUMING = "Resuming from checkpoint";
    private static final Duration START_TIMEOUT = Duration.ofMinutes(3);
    private static final Pattern REST = Pattern.compile("REST and metrics (http://[0-9.]+:\\d+)");
    /** Serve starts that fail in a row before the run gives up: a supervisor's retries are not endless either. */
    private static final int MAX_FAILED_STARTS = 10;

    private final Path dir;
    private final String bootstrapServers;
    private final List<String> serveOptions;
    private final Timeline timeline;
    private MstarProcess serve;
    private FlinkRest rest;
    private int starts;
    private int exitedByThemselves;

    /** @param serveOptions options of serve beyond the broker, model and state directory (-D settings) */
    ServeUnderChaos(Path dir, String bootstrapServers, List<String> serveOptions, Timeline timeline) {
        this.dir = dir;
        this.bootstrapServers = bootstrapServers;
        this.serveOptions = serveOptions;
        this.timeline = timeline;
    }

    @Override
    public void start() throws Exception {
        startAndAwaitRunning();
    }

    @Override
    public Set<FaultSchedule.Kind> kinds() {
        return Set.of(FaultSchedule.Kind.SERVE_KILL, FaultSchedule.Kind.SERVE_FREEZE,
                FaultSchedule.Kind.KILL_DURING_RESTORE, FaultSchedule.Kind.KILL_MID_CHECKPOINT,
                FaultSchedule.Kind.KILL_AT_COMMIT);
    }

    @Override
    public void apply(FaultSchedule.Fault fault) throws Exception {
        switch (fault.kind()) {
            case SERVE_KILL -> {
                timeline.add("SIGKILL serve-" + starts);
                serve.kill();
                restart(fault);
            }
            case SERVE_FREEZE -> {
                timeline.add("SIGSTOP serve-" + starts + " for " + fault.lengthMillis() + " ms");
                serve.stop();
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                serve.resume();
                timeline.add("SIGCONT serve-" + starts);
            }
            case KILL_DURING_RESTORE -> {
                timeline.add("SIGKILL serve-" + starts + " (then again mid-restore)");
                serve.kill();
                MstarProcess restoring = startProcess();
                if (!awaitOrExit(restoring, RESUMING)) {
                    restart(fault);
                    return;
                }
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                timeline.add("SIGKILL serve-" + starts + " " + fault.lengthMillis() + " ms after it said it resumes"
                        + (says(restoring, SERVE_UP) ? " (it was running already)" : ""));
                restoring.kill();
                restart(fault);
            }
            case KILL_MID_CHECKPOINT -> killAt(fault, awaitCheckpoint(CheckpointWatch.Moment.IN_PROGRESS,
                    START_TIMEOUT), "while its checkpoint %s was in progress");
            case KILL_AT_COMMIT -> {
                Optional<Path> completed = awaitCheckpoint(CheckpointWatch.Moment.COMPLETED, START_TIMEOUT);
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                killAt(fault, completed, fault.lengthMillis() + " ms after its checkpoint %s completed");
            }
            default -> throw new IllegalArgumentException("serve takes no " + fault.kind());
        }
    }

    private void killAt(FaultSchedule.Fault fault, Optional<Path> checkpoint, String when) throws Exception {
        serve.kill();
        timeline.add("SIGKILL serve-" + starts + " " + checkpoint.map(c -> when.formatted(c.getFileName()))
                .orElse("(no checkpoint seen within " + START_TIMEOUT + ")"));
        restart(fault);
    }

    /** Starts serve again; unless the fault overlaps the next, waits until it runs. */
    private void restart(FaultSchedule.Fault fault) throws Exception {
        if (fault.overlaps()) {
            startProcess();
            timeline.add("serve-" + starts + " starts (the next fault does not wait for it)");
        } else {
            startAndAwaitRunning();
        }
    }

    @Override
    public void restartWhatExited() throws Exception {
        if (serve.isAlive()) {
            return;
        }
        exitedByThemselves++;
        timeline.add("serve-" + starts + " exited by itself (" + lastLine(serve) + ")");
        startAndAwaitRunning();
    }

    private void startAndAwaitRunning() throws Exception {
        for (int failed = 0; failed < MAX_FAILED_STARTS; failed++) {
            MstarProcess started = startProcess();
            if (awaitOrExit(started, SERVE_UP)) {
                Matcher m = REST.matcher(Files.readString(started.log()));
                rest = new FlinkRest(m.find() ? m.group(1) : "http://127.0.0.1:8081");
                timeline.add("serve-" + starts + " runs");
                return;
            }
        }
        throw new IllegalStateException("serve exited before it ran " + MAX_FAILED_STARTS + " times in a row");
    }

    /**
     * Waits until serve's console says {@code line}; false when serve exited first (noted and counted).
     *
     * @throws IllegalStateException when it neither says it nor exits in time
     */
    private boolean awaitOrExit(MstarProcess process, String line) throws IOException, InterruptedException {
        try {
            process.awaitLine(line, START_TIMEOUT);
            return true;
        } catch (IllegalStateException exited) {
            if (process.isAlive()) {
                throw exited;
            }
            exitedByThemselves++;
            timeline.add("serve-" + starts + " exited before it said '" + line + "' (" + lastLine(process) + ")");
            return false;
        }
    }

    private MstarProcess startProcess() throws IOException {
        List<String> args = new ArrayList<>(List.of("serve", "--random",
                "--bootstrap-servers", bootstrapServers, "--device", "cpu",
                "--state-dir", stateDir().toString()));
        args.addAll(serveOptions);
        serve = MstarProcess.start(dir.resolve("serve-" + ++starts + ".log"), args);
        return serve;
    }

    private static boolean says(MstarProcess process, String text) throws IOException {
        return Files.readString(process.log()).contains(text);
    }

    private static String lastLine(MstarProcess process) throws IOException {
        List<String> lines = Files.readAllLines(process.log());
        return lines.isEmpty() ? "no output" : "last line: " + lines.get(lines.size() - 1);
    }

    @Override
    public FlinkRest rest() {
        return rest;
    }

    @Override
    public Path stateDir() {
        return dir.resolve("state");
    }

    @Override
    public String summary() {
        return "serve started " + starts + " times, " + exitedByThemselves + " of them exited without a kill";
    }

    @Override
    public List<String> alarmingLogLines() throws IOException {
        return DataLossLines.in(dir);
    }

    @Override
    public void close() throws InterruptedException {
        if (serve != null) {
            serve.kill();
        }
    }
}
