package org.mstar.device;

/**
 * A model or request shape this device cannot run at all (no kernel for it), as opposed to a transient failure:
 * retrying on the same device cannot succeed.
 */
public class UnsupportedOnDeviceException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public UnsupportedOnDeviceException(String message) {
        super(message);
    }
}
