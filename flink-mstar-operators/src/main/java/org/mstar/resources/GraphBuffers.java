package org.mstar.resources;

import java.util.List;

/** A {@link Resource} whose plans captured device graphs read from static buffers it sizes up front. */
public interface GraphBuffers {

    /** Size what captured replays will read: grow, never shrink, never move what an earlier call sized. */
    void buildAcceleratorGraphBuffers(List<CGSlotSpec> slots, int maxBs, int maxSeqLen);
}
