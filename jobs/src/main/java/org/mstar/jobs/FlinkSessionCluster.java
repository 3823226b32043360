package org.mstar.jobs;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A Flink session cluster on this machine, as {@code scripts/cluster/cluster.sh} starts one (its JobManagers and
 * TaskManagers each a JVM with a pid file in the cluster's folder), on ports of its own; and what the kill tests and
 * chaos runs do to it: send its processes signals at once, and ask its JobManager's REST API where a job runs.
 */
public final class FlinkSessionCluster {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern RESTARTS = Pattern.compile("\"value\":\"?(\\d+)");

    private final Path script;
    private final Path dir;
    private final int rpcPort = freePort();
    private final int restPort2 = freePort();
    private final int zooKeeperPort = freePort();
    private final ClusterRest rest = new ClusterRest(this::restUrl, Duration.ofSeconds(10));
    private int restPort = freePort();
    private final Map<String, String> settings = new HashMap<>();

    /**
     * @param repoRoot the checkout, whose {@code scripts/cluster/cluster.sh} starts the cluster
     * @param dir the cluster's folder (conf, logs, pid files)
     */
    public FlinkSessionCluster(Path repoRoot, Path dir) {
        this.script = repoRoot.resolve("scripts/cluster/cluster.sh");
        this.dir = dir;
    }

    /** Sets one of cluster.sh's settings ({@code MSTAR_TM_SLOTS}, ...) for its later runs. */
    public void set(String variable, String value) {
        settings.put(variable, value);
    }

    /** Runs {@code cluster.sh ARGS} for this cluster; returns its output, throwing with it when the script fails. */
    public String script(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("bash", script.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().putAll(settings);
        pb.environment().put("MSTAR_CLUSTER_DIR", dir.toString());
        pb.environment().put("MSTAR_REST_PORT", Integer.toString(restPort));
        pb.environment().put("MSTAR_RPC_PORT", Integer.toString(rpcPort));
        pb.environment().put("MSTAR_REST_PORT_2", Integer.toString(restPort2));
        pb.environment().put("MSTAR_ZOOKEEPER_PORT", Integer.toString(zooKeeperPort));
        // DJL's tokenizer would otherwise try to report usage over the network
        pb.environment().put("OPT_OUT_TRACKING", "true");
        Process p = pb.start();
        String output = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) {
            throw new IllegalStateException("cluster.sh " + String.join(" ", args) + " failed:\n" + output);
        }
        return output;
    }

    /**
     * The process of pid file {@code name}.pid ({@code jobmanager}, {@code taskmanager-2}, ...).
     *
     * @throws IllegalStateException when it is not running
     */
    public ProcessHandle process(String name) throws IOException {
        long pid = Long.parseLong(Files.readString(dir.resolve(name + ".pid")).strip());
        return ProcessHandle.of(pid).filter(ProcessHandle::isAlive)
                .orElseThrow(() -> new IllegalStateException(name + " (pid " + pid + ") is not running"));
    }

    /**
     * SIGKILLs process {@code name} and waits until it is gone, as {@code cluster.sh kill-taskmanager} and
     * {@code kill-jobmanager} do but without starting a script first: with checkpoints every 500 ms, a script's
     * start-up is time enough for another, and the moment a caller chose would have passed.
     */
    public void kill(String name) throws IOException, InterruptedException, ExecutionException, TimeoutException {
        ProcessHandle process = process(name);
        process.destroyForcibly(); // SIGKILL
        process.onExit().get(30, TimeUnit.SECONDS);
    }

    /** Sends process {@code name} a signal by its name ({@code STOP}, {@code CONT}). */
    public void signal(String name, String signal) throws IOException, InterruptedException {
        long pid = process(name).pid();
        int rc = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start().waitFor();
        if (rc != 0) {
            throw new IOException("kill -" + signal + " " + pid + " (" + name + ") exited " + rc);
        }
    }

    /** From now on the REST API is asked at JobManager 2's port (a high-availability cluster's standby). */
    public void useJobManager2() {
        restPort = restPort2;
    }

    public String restUrl() {
        return "http://localhost:" + restPort;
    }

    public Path dir() {
        return dir;
    }

    /** The JobManagers' log files, in name order. */
    public List<Path> jobManagerLogs() throws IOException {
        return logs("jobmanager");
    }

    /** The TaskManagers' log files (a killed one's lines included: its replacement appends to them), in name order. */
    public List<Path> taskManagerLogs() throws IOException {
        return logs("taskmanager");
    }

    private List<Path> logs(String process) throws IOException {
        try (Stream<Path> files = Files.list(dir.resolve("log"))) {
            return files.filter(f -> f.getFileName().toString().matches(process + ".*\\.log")).sorted().toList();
        }
    }

    /**
     * The number of a TaskManager that runs a subtask of the vertex whose name contains {@code vertexName}, as the
     * JobManager's REST API says, once one does.
     */
    public String taskManagerRunning(String jobId, String vertexName, Duration timeout) throws Exception {
        String vertex = null;
        for (JsonNode v : JSON.readTree(get("/jobs/" + jobId)).path("vertices")) {
            if (v.path("name").asText().contains(vertexName)) {
                vertex = v.path("id").asText();
            }
        }
        if (vertex == null) {
            throw new IllegalStateException("job " + jobId + " has no vertex named *" + vertexName + "*");
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            last = get("/jobs/" + jobId + "/vertices/" + vertex + "/taskmanagers");
            for (JsonNode tm : JSON.readTree(last).path("taskmanagers")) {
                String id = tm.path("taskmanager-id").asText();
                if (tm.path("status").asText().equals("RUNNING") && id.startsWith("taskmanager-")) {
                    return id.substring("taskmanager-".length());
                }
            }
            TimeUnit.MILLISECONDS.sleep(100); // poll interval of a condition with a deadline
        }
        throw new IllegalStateException("no TaskManager runs " + vertexName + " of job " + jobId + ": " + last);
    }

    /** Polls the REST API until it reports the job running. */
    public void awaitRunning(String jobId, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            last = get("/jobs/" + jobId);
            if (last.startsWith("{") && JSON.readTree(last).path("state").asText().equals("RUNNING")) {
                return;
            }
            TimeUnit.MILLISECONDS.sleep(200); // poll interval of a condition with a deadline
        }
        throw new IllegalStateException("job " + jobId + " is not running: " + last);
    }

    /** Polls the REST API until the job has restarted {@code count} times. */
    public void awaitRestarts(String jobId, int count, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last = "";
        while (System.nanoTime() < deadline) {
            last = get("/jobs/" + jobId + "/metrics?get=numRestarts");
            Matcher m = RESTARTS.matcher(last);
            if (m.find() && Integer.parseInt(m.group(1)) >= count) {
                return;
            }
            TimeUnit.MILLISECONDS.sleep(200); // poll interval of a condition with a deadline
        }
        throw new IllegalStateException("job " + jobId + " did not restart " + count + " times: " + last);
    }

    /** The body of a GET of {@code path} from the REST API; an unreachable JobManager answers "". */
    public String get(String path) throws InterruptedException {
        return rest.bodyOrEmpty(path);
    }

    /** The shaded job jar {@code package} writes into {@code jobs/target} (not the original-*.jar it replaces). */
    public static Path jobJar(Path repoRoot) throws IOException {
        try (Stream<Path> files = Files.list(repoRoot.resolve("jobs/target"))) {
            return files.filter(f -> f.getFileName().toString().matches("mstar-jobs-.*\\.jar"))
                    .findFirst().orElseThrow(() -> new IllegalStateException("no jobs/target/mstar-jobs-*.jar: run"
                            + " `mvn -pl jobs -am package -DskipTests` first"));
        }
    }

    private static int freePort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException("no free port", e);
        }
    }
}
