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
import org.mstar.jobs.FlinkSessionCluster;

/**
 * {@code mstar serve} submitted with {@code flink run -d} to a session cluster of {@code scripts/cluster/cluster.sh}:
 * a JobManager and two TaskManagers, each a JVM. A killed TaskManager is replaced by a new one of the same number, as
 * a supervisor would; the JobManager has no high availability, so after its death it is started again and the same
 * command submitted, which resumes from the latest checkpoint in the state directory.
 */
final class ClusterUnderChaos implements ChaosJob {
    private static final Duration TIMEOUT = Duration.ofMinutes(3);
    private static final String GENERATE = "mstar generate";
    private static final Pattern JOB_ID = Pattern.compile("JobID ([0-9a-f]{32})");
    private static final int TASKMANAGERS = 2;

    private final Path repoRoot;
    private final Path dir;
    private final String bootstrapServers;
    private final List<String> serveOptions;
    private final Timeline timeline;
    private final FlinkSessionCluster cluster;
    private String jobId;
    private int submits;
    private int taskManagerStarts = TASKMANAGERS;
    private int jobManagerStarts = 1;
    private int exitedByThemselves;
    private int unregistered;

    ClusterUnderChaos(Path repoRoot, Path dir, String bootstrapServers, List<String> serveOptions, Timeline timeline) {
        this.repoRoot = repoRoot;
        this.dir = dir;
        this.bootstrapServers = bootstrapServers;
        this.serveOptions = serveOptions;
        this.timeline = timeline;
        this.cluster = new FlinkSessionCluster(repoRoot, dir.resolve("cluster"));
    }

    @Override
    public void start() throws Exception {
        cluster.script("start", Integer.toString(TASKMANAGERS));
        submit();
    }

    /** {@code flink run -d jobs.jar serve ...}, the same command every time; waits until the job runs. */
    private void submit() throws Exception {
        List<String> args = new ArrayList<>(List.of("run", "-d", FlinkSessionCluster.jobJar(repoRoot).toString(),
                "serve", "--random", "--bootstrap-servers", bootstrapServers, "--device", "cpu",
                "--parallelism", Integer.toString(TASKMANAGERS), "--state-dir", stateDir().toString()));
        args.addAll(serveOptions);
        String output = cluster.script(args.toArray(String[]::new));
        Files.writeString(dir.resolve("submit-" + ++submits + ".log"), output);
        Matcher id = JOB_ID.matcher(output);
        if (!id.find()) {
            throw new IllegalStateException("flink run printed no job id:\n" + output);
        }
        jobId = id.group(1);
        cluster.awaitRunning(jobId, TIMEOUT);
        timeline.add("job " + jobId + " runs (submission " + submits + (output.contains(ServeUnderChaos.RESUMING)
                ? ", resumed from a checkpoint)" : ")"));
    }

    @Override
    public Set<FaultSchedule.Kind> kinds() {
        return Set.of(FaultSchedule.Kind.TASKMANAGER_KILL, FaultSchedule.Kind.TASKMANAGER_FREEZE,
                FaultSchedule.Kind.JOBMANAGER_KILL, FaultSchedule.Kind.JOBMANAGER_FREEZE,
                FaultSchedule.Kind.KILL_MID_CHECKPOINT, FaultSchedule.Kind.KILL_AT_COMMIT);
    }

    @Override
    public void apply(FaultSchedule.Fault fault) throws Exception {
        switch (fault.kind()) {
            case TASKMANAGER_KILL -> killTaskManager(fault, "");
            case TASKMANAGER_FREEZE -> freeze("taskmanager-" + runningGenerate(), fault);
            case JOBMANAGER_KILL -> {
                timeline.add("SIGKILL the JobManager");
                cluster.kill("jobmanager");
                restartJobManager();
            }
            case JOBMANAGER_FREEZE -> freeze("jobmanager", fault);
            case KILL_MID_CHECKPOINT -> {
                Optional<Path> chk = awaitCheckpoint(CheckpointWatch.Moment.IN_PROGRESS, TIMEOUT);
                killTaskManager(fault, chk.map(c -> " while checkpoint " + c.getFileName() + " was in progress")
                        .orElse(" (no checkpoint seen within " + TIMEOUT + ")"));
            }
            case KILL_AT_COMMIT -> {
                Optional<Path> chk = awaitCheckpoint(CheckpointWatch.Moment.COMPLETED, TIMEOUT);
                TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
                killTaskManager(fault, chk.map(c -> " " + fault.lengthMillis() + " ms after checkpoint "
                        + c.getFileName() + " completed").orElse(" (no checkpoint seen within " + TIMEOUT + ")"));
            }
            default -> throw new IllegalArgumentException("a cluster's job takes no " + fault.kind());
        }
    }

    /** SIGKILLs a TaskManager that runs a generate subtask and starts a new one of its number. */
    private void killTaskManager(FaultSchedule.Fault fault, String when) throws Exception {
        String n = runningGenerate();
        cluster.kill("taskmanager-" + n);
        timeline.add("SIGKILL TaskManager " + n + when);
        cluster.script("start-taskmanager", n);
        taskManagerStarts++;
        if (!fault.overlaps()) {
            cluster.awaitRunning(jobId, TIMEOUT);
        }
    }

    private void freeze(String process, FaultSchedule.Fault fault) throws Exception {
        timeline.add("SIGSTOP " + process + " for " + fault.lengthMillis() + " ms");
        cluster.signal(process, "STOP");
        TimeUnit.MILLISECONDS.sleep(fault.lengthMillis()); // the schedule's own seeded delay
        cluster.signal(process, "CONT");
        timeline.add("SIGCONT " + process);
    }

    private String runningGenerate() throws Exception {
        return cluster.taskManagerRunning(jobId, GENERATE, TIMEOUT);
    }

    private void restartJobManager() throws Exception {
        try {
            cluster.script("start-jobmanager", Integer.toString(TASKMANAGERS));
        } catch (IllegalStateException notAllRegistered) {
            restartUnregisteredTaskManagers();
        }
        jobManagerStarts++;
        submit();
    }

    /**
     * Restarts each TaskManager the new JobManager does not list, as a supervisor's liveness check would. Seen in a
     * run: a TaskManager that resolved the dying JobManager's ResourceManager went on registering at that dead
     * incarnation every 10 s; Flink ends such a TaskManager only after {@code taskmanager.registration.timeout}
     * (5 min).
     */
    private void restartUnregisteredTaskManagers() throws Exception {
        String registered = cluster.get("/taskmanagers");
        for (int n = 1; n <= TASKMANAGERS; n++) {
            String name = "taskmanager-" + n;
            if (!registered.contains("\"" + name + "\"")) {
                timeline.add("TaskManager " + n + " did not register at the new JobManager; starting a new one");
                if (alive(name)) {
                    cluster.kill(name);
                }
                cluster.script("start-taskmanager", Integer.toString(n));
                taskManagerStarts++;
                unregistered++;
            }
        }
    }

    @Override
    public void restartWhatExited() throws Exception {
        for (int n = 1; n <= TASKMANAGERS; n++) {
            if (!alive("taskmanager-" + n)) {
                exitedByThemselves++;
                timeline.add("TaskManager " + n + " exited by itself; starting a new one");
                cluster.script("start-taskmanager", Integer.toString(n));
                taskManagerStarts++;
            }
        }
        if (!alive("jobmanager")) {
            exitedByThemselves++;
            timeline.add("the JobManager exited by itself; starting it again");
            restartJobManager();
        }
    }

    private boolean alive(String process) throws IOException {
        try {
            cluster.process(process);
            return true;
        } catch (IllegalStateException gone) {
            return false;
        }
    }

    @Override
    public FlinkRest rest() {
        return new FlinkRest(cluster.restUrl());
    }

    @Override
    public Path stateDir() {
        return dir.resolve("state");
    }

    @Override
    public String summary() {
        return "TaskManagers started " + taskManagerStarts + " times, the JobManager " + jobManagerStarts
                + " times, the job submitted " + submits + " times; " + exitedByThemselves
                + " processes exited without a kill, " + unregistered + " TaskManagers restarted because they did"
                + " not register at a restarted JobManager";
    }

    @Override
    public List<String> alarmingLogLines() throws IOException {
        return DataLossLines.in(dir, cluster.dir().resolve("log"));
    }

    @Override
    public void close() throws IOException, InterruptedException {
        cluster.script("stop");
    }
}
