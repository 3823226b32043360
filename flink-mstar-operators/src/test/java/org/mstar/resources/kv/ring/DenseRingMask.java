package org.mstar.resources.kv.ring;

import java.util.ArrayList;
import java.util.List;

/**
 * The ring's visibility rule stated over a session's whole frame history instead of its slots, for dense
 * references that keep every frame: frame {@code fp} of a layer sees itself and each earlier kept frame
 * ({@code f % dilation == 0}) that no later kept frame before {@code fp} displaced from its slot, unless
 * {@code fp} is kept and about to overwrite that slot.
 */
public final class DenseRingMask {
    private DenseRingMask() {
    }

    /** Frames {@code fp} attends at a layer of this geometry, oldest first, ending with {@code fp} itself. */
    public static List<Integer> visibleFrames(RingGeometry g, int fp) {
        List<Integer> out = new ArrayList<>();
        for (int f = 0; f < fp; f++) {
            if (!g.isWriteStep(f)) continue;
            boolean displaced = false;
            for (int later = f + 1; later < fp && !displaced; later++) {
                displaced = g.isWriteStep(later) && g.slot(later) == g.slot(f);
            }
            boolean overwritten = g.isWriteStep(fp) && g.slot(fp) == g.slot(f);
            if (!displaced && !overwritten) out.add(f);
        }
        out.add(fp);
        return out;
    }
}
