package org.mstar.jobs.chaos;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The file system under serve's {@code --state-dir}: a small tmpfs the run mounts there, so that a fault can fill it
 * to the last byte and free it again without touching the machine's own disks. Mounting needs root (or
 * CAP_SYS_ADMIN); without it the run leaves this fault out.
 */
final class StateDisk implements AutoCloseable {
    private static final String SIZE = "64m";
    private static final byte[] CHUNK = new byte[1 << 20];

    private final Path mountPoint;
    private final Path filler;

    private StateDisk(Path mountPoint) {
        this.mountPoint = mountPoint;
        this.filler = mountPoint.resolve("chaos-filler");
    }

    /** Mounts a tmpfs at {@code mountPoint} (created empty); empty when this process may not mount one. */
    static Optional<StateDisk> mount(Path mountPoint) throws IOException, InterruptedException {
        Files.createDirectories(mountPoint);
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=" + SIZE, "tmpfs", mountPoint.toString())
                .redirectErrorStream(true).start();
        String output = new String(mount.getInputStream().readAllBytes());
        if (mount.waitFor() != 0) {
            System.err.println("chaos: no tmpfs under the state directory (" + output.strip() + "): no DISK_FULL faults");
            return Optional.empty();
        }
        return Optional.of(new StateDisk(mountPoint));
    }

    /** Writes one file until the file system says it has no space left; returns how many bytes it took. */
    long fill() throws IOException {
        long written = 0;
        try (OutputStream out = Files.newOutputStream(filler)) {
            while (true) {
                out.write(CHUNK);
                written += CHUNK.length;
            }
        } catch (IOException full) {
            if (!String.valueOf(full.getMessage()).contains("No space left")) {
                throw full;
            }
            return written;
        }
    }

    void free() throws IOException {
        Files.deleteIfExists(filler);
    }

    /** Unmounts (lazily: a process killed a moment ago may not have released its files yet). */
    @Override
    public void close() throws IOException, InterruptedException {
        new ProcessBuilder("umount", "-l", mountPoint.toString()).inheritIO().start().waitFor();
    }
}
