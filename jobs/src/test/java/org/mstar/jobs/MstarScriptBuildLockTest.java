package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@code mstar} script's first-run build, with Maven and Java replaced by stand-ins on the PATH: two commands
 * started together (the README's {@code ./mstar kafka &} then {@code ./mstar serve}) build once, the second waiting
 * for the first; a lock left by a build that was killed does not block the next one.
 */
class MstarScriptBuildLockTest {
    private static final Path SCRIPT = Path.of("..", "mstar");
    private static final Duration PATIENCE = Duration.ofSeconds(30);

    @Test
    void aSecondCommandWaitsForTheFirstOnesBuildAndUsesIt(@TempDir Path dir) throws Exception {
        Path root = checkout(dir);
        Path builds = dir.resolve("builds.log");
        Path release = dir.resolve("release");
        Process first = start(dir, root, "first");
        Process second = null;
        try {
            awaitFile(builds, s -> s.lines().count() == 1);
            second = start(dir, root, "second");
            awaitFile(dir.resolve("second.err"), s -> s.contains("waiting for another mstar's build"));
            Files.createFile(release);

            assertThat(first.waitFor(30, TimeUnit.SECONDS) && second.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(List.of(first.exitValue(), second.exitValue())).containsExactly(0, 0);
        } finally {
            // a failing run must not leave a stand-in build waiting forever
            stop(first);
            stop(second);
        }
        assertThat(Files.readAllLines(builds)).hasSize(1);
        assertThat(Files.readString(dir.resolve("first.out"))).contains("ran org.mstar.jobs.Mstar first");
        assertThat(Files.readString(dir.resolve("second.out"))).contains("ran org.mstar.jobs.Mstar second");
        assertThat(root.resolve("jobs/target/.mstar-build.lock")).doesNotExist();
    }

    @Test
    void aLockWhoseOwnerIsGoneIsTakenOver(@TempDir Path dir) throws Exception {
        Path root = checkout(dir);
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        Path lock = Files.createDirectories(root.resolve("jobs/target/.mstar-build.lock"));
        Files.writeString(lock.resolve("pid"), gone.pid() + "\n");
        Files.createFile(dir.resolve("release"));

        Process command = start(dir, root, "after");
        try {
            assertThat(command.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(command.exitValue()).isZero();
        } finally {
            stop(command);
        }
        assertThat(Files.readAllLines(dir.resolve("builds.log"))).hasSize(1);
        assertThat(lock).doesNotExist();
    }

    /** A checkout holding the script, and a bin folder of stand-ins: mvn logs itself, waits for release, writes the class path. */
    private static Path checkout(Path dir) throws IOException {
        Path root = Files.createDirectories(dir.resolve("checkout"));
        Files.copy(SCRIPT, root.resolve("mstar"));
        Path bin = Files.createDirectories(dir.resolve("bin"));
        executable(bin.resolve("mvn"), "#!/usr/bin/env bash\n"
                + "echo build >> '" + dir.resolve("builds.log") + "'\n"
                + "while [ ! -e '" + dir.resolve("release") + "' ]; do sleep 0.05; done\n"
                + "mkdir -p '" + root.resolve("jobs/target") + "'\n"
                + "echo /classes > '" + root.resolve("jobs/target/mstar.classpath") + "'\n");
        executable(bin.resolve("java"), "#!/usr/bin/env bash\necho \"ran ${@: -2}\"\n");
        return root;
    }

    private static void executable(Path file, String text) throws IOException {
        Files.writeString(file, text);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    private static Process start(Path dir, Path root, String name) throws IOException {
        ProcessBuilder pb = new ProcessBuilder("bash", root.resolve("mstar").toString(), name)
                .redirectOutput(dir.resolve(name + ".out").toFile()).redirectError(dir.resolve(name + ".err").toFile());
        pb.environment().put("PATH", dir.resolve("bin") + ":" + System.getenv("PATH"));
        pb.environment().remove("MSTAR_REBUILD");
        return pb.start();
    }

    /** Ends {@code process} (null: none) and every process it started. */
    private static void stop(Process process) {
        if (process != null) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
        }
    }

    /** Polls {@code file} until its text satisfies {@code condition}: the processes under test say so in files. */
    private static void awaitFile(Path file, Predicate<String> condition) throws Exception {
        long deadline = System.nanoTime() + PATIENCE.toNanos();
        while (!(Files.exists(file) && condition.test(Files.readString(file)))) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no change in " + file + " within " + PATIENCE);
            }
            Thread.sleep(20);
        }
    }
}
