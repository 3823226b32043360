package org.mstar.jobs;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** The command line that runs {@code mstar} in a child JVM on the tests' class path, as a user runs it. */
final class MstarChildProcess {
    private MstarChildProcess() {}

    /** {@code java ... org.mstar.jobs.Mstar} followed by {@code args}. */
    static List<String> command(List<String> args) {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx1g",
                "--add-opens=java.base/java.util=ALL-UNNAMED",
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "-cp", testClassPath(),
                Mstar.class.getName()));
        command.addAll(args);
        return command;
    }

    private static String testClassPath() {
        // Surefire starts the test JVM from a manifest-only jar; it names the real class path here.
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null ? cp : System.getProperty("java.class.path");
    }
}
