package org.mstar.device;

/**
 * The device itself failed (a driver or library call), as opposed to one request's data: everything on the
 * device is suspect, so callers let it end the task, whose restart recovers every request.
 */
public class DeviceFault extends RuntimeException {
    public DeviceFault(String message) {
        super(message);
    }
}
