package org.mstar.resources.kv;

/** A network hand-off's bytes could not be pulled whole and intact ({@link KvBytesServer#pull}). */
public final class KvBytesGone extends Exception {
    KvBytesGone(String message) {
        super(message);
    }

    KvBytesGone(String message, Throwable cause) {
        super(message, cause);
    }
}
