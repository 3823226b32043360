package org.mstar.device;

/**
 * A device that was asked for cannot be opened on this machine (no CUDA driver, no such GPU, a build without CUDA):
 * a start-up failure to report in one line, not a fault of a running device.
 */
public class DeviceUnavailableException extends IllegalStateException {
    public DeviceUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
