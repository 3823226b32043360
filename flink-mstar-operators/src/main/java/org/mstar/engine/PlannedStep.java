package org.mstar.engine;

import java.util.List;
import org.mstar.resources.SubmoduleStep;

/**
 * A step ready to admit: the scheduler's rows, the step the resources see, the token ids fed (rows
 * concatenated; null for a step launched ahead, whose one token per row the device feeds from the draw before)
 * and, for the rows that sample, their row indices and request ids in row order.
 */
record PlannedStep(List<BatchRow> rows, SubmoduleStep step, int[] tokens, int[] sampleRows, List<String> sampleRids) {

    int tokenCount() {
        return tokens != null ? tokens.length : rows.size();
    }
}
