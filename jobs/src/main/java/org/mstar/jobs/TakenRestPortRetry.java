package org.mstar.jobs;

import java.net.BindException;
import java.util.concurrent.Callable;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;

/**
 * Starts serve's local job again on the next free REST port when another process bound the port serve chose before
 * Flink's REST endpoint did: serve probes for a free port and Flink binds it moments later, so serves starting side
 * by side on one machine can pick the same port, and all but one would exit with "Could not start rest endpoint".
 * Only a port serve chose itself is changed; one given with {@code -Drest.port} is the user's to keep.
 */
final class TakenRestPortRetry {
    /** Starts before the failure stands: each retry probes afresh, so more would mean a machine out of ports. */
    static final int ATTEMPTS = 5;

    private TakenRestPortRetry() {}

    /**
     * @param conf the job's configuration, whose {@link RestOptions#BIND_PORT} a retry moves to the next free port
     * @param portChosenHere whether serve chose that port (no {@code -Drest.port})
     * @param start builds the job from {@code conf} and starts it
     */
    static <T> T start(Configuration conf, boolean portChosenHere, Callable<T> start) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return start.call();
            } catch (Exception e) {
                if (!portChosenHere || attempt == ATTEMPTS || !restPortTaken(e)) {
                    throw e;
                }
                int taken = Integer.parseInt(conf.get(RestOptions.BIND_PORT));
                String last = ServeJob.REST_PORTS.substring(ServeJob.REST_PORTS.indexOf('-') + 1);
                conf.set(RestOptions.BIND_PORT, ServeJob.freePort(conf.get(RestOptions.BIND_ADDRESS),
                        (taken + 1) + "-" + last));
            }
        }
    }

    /** Whether a failure to start is Flink's REST endpoint finding its port taken. */
    private static boolean restPortTaken(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof BindException && String.valueOf(t.getMessage()).contains("rest endpoint")) {
                return true;
            }
        }
        return false;
    }
}
