package org.mstar.engine;

import java.util.Arrays;
import java.util.List;
import org.mstar.resources.SubmoduleStep;

/**
 * A step ready to admit: the scheduler's rows, the step the resources see, the token ids fed (rows
 * concatenated; null for a step launched ahead, whose one token per row the device feeds from the draw before),
 * for the rows that sample, their row indices and request ids in row order, the rows whose logits their request
 * reads on the host ({@link ModelRequest.Yield#LOGITS}), and the requests whose step starts a sequence.
 */
record PlannedStep(List<BatchRow> rows, SubmoduleStep step, int[] tokens, int[] sampleRows, List<String> sampleRids,
                   int[] logitsRows, List<ModelRequest> starting) {

    /** The rows whose logits the forward returns: the sampled rows, then the rows read on the host. */
    int[] outputRows() {
        if (logitsRows.length == 0) {
            return sampleRows;
        }
        int[] rows = Arrays.copyOf(sampleRows, sampleRows.length + logitsRows.length);
        System.arraycopy(logitsRows, 0, rows, sampleRows.length, logitsRows.length);
        return rows;
    }

    int tokenCount() {
        return tokens != null ? tokens.length : rows.size();
    }
}
