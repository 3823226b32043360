package org.mstar.flink;

import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.mstar.device.DeviceUnavailableException;
import org.mstar.model.ModelFormatException;

/**
 * An engine that cannot be built because its model folder cannot be read or its device cannot be opened fails the
 * same way after every restart: such a failure stops the job (Flink's {@link SuppressRestartsException}) instead of
 * restarting it until the restart strategy gives up, or forever.
 */
public final class StartUpFailures {
    private StartUpFailures() {}

    /** {@code e} as the exception to throw out of an operator's {@code open()}. */
    public static Exception atEngineBuild(Exception e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SuppressRestartsException) {
                return e;
            }
            if (t instanceof ModelFormatException || t instanceof DeviceUnavailableException) {
                return new SuppressRestartsException(t);
            }
        }
        return e;
    }
}
