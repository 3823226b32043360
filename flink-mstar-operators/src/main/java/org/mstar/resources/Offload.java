package org.mstar.resources;

/** A {@link Resource} that can move a request's state off the device under pressure, and bring it back. */
public interface Offload {

    boolean isOffloaded(String rid);

    /** Move the request's state off the device; returns what was reclaimed (0 if nothing moved). */
    int offload(String rid);

    /** Bring it back; false (and nothing moved) when it does not fit yet. */
    boolean reload(String rid);

    boolean canReload(String rid);

    /** What offload would free; 0 means not an eviction candidate. */
    int reclaimable(String rid);
}
