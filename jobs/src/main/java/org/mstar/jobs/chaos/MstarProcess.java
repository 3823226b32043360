package org.mstar.jobs.chaos;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.mstar.jobs.Mstar;

/**
 * One {@code mstar} command ({@code kafka}, {@code serve}) in a child JVM on this JVM's class path, its console in a
 * log file, and the signals a chaos run sends it.
 */
public final class MstarProcess {
    private final Process process;
    private final Path log;

    private MstarProcess(Process process, Path log) {
        this.process = process;
        this.log = log;
    }

    public static MstarProcess start(Path log, List<String> args) throws IOException {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx1g",
                "--add-opens=java.base/java.util=ALL-UNNAMED",
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "-cp", classPath(),
                Mstar.class.getName()));
        command.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        // DJL's tokenizer would otherwise try to report usage over the network
        pb.environment().put("OPT_OUT_TRACKING", "true");
        return new MstarProcess(pb.start(), log);
    }

    /** This JVM's class path; under Surefire, whose JVM starts from a manifest-only jar, the one that jar names. */
    private static String classPath() {
        return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    }

    /**
     * Waits until the console shows a line containing {@code text}.
     *
     * @throws IllegalStateException when the process ends first or {@code timeout} runs out
     */
    public void awaitLine(String text, Duration timeout) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!Files.readString(log).contains(text)) {
            if (!process.isAlive()) {
                throw new IllegalStateException(log.getFileName() + " ended (exit " + process.exitValue()
                        + ") before saying '" + text + "'");
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(log.getFileName() + " did not say '" + text + "' within " + timeout);
            }
            TimeUnit.MILLISECONDS.sleep(50); // poll interval of a condition with a deadline
        }
    }

    /** SIGKILL, then waits until the process is gone: no shutdown hook, no final checkpoint. */
    public void kill() throws InterruptedException {
        process.destroyForcibly().waitFor();
    }

    /** SIGTERM, then waits until the process is gone: its shutdown hooks run (a clean stop). */
    void terminate() throws InterruptedException {
        process.destroy();
        process.waitFor();
    }

    /** SIGSTOP: the whole JVM freezes, its sockets stay open. */
    void stop() throws IOException, InterruptedException {
        signal("STOP");
    }

    /** SIGCONT after {@link #stop()}. */
    void resume() throws IOException, InterruptedException {
        signal("CONT");
    }

    private void signal(String name) throws IOException, InterruptedException {
        if (!process.isAlive()) {
            throw new IllegalStateException(log.getFileName() + " ended (exit " + process.exitValue() + ") before SIG"
                    + name);
        }
        int rc = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor();
        if (rc != 0) {
            throw new IOException("kill -" + name + " " + process.pid() + " exited " + rc);
        }
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    public Path log() {
        return log;
    }
}
