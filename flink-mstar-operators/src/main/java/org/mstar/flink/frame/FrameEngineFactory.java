package org.mstar.flink.frame;

import java.io.Serializable;
import org.mstar.engine.frame.FrameSessions;

/**
 * Builds the frame engine of one session-operator subtask, in the operator's {@code open()} on the TaskManager;
 * instances travel inside the job graph, so they hold only configuration.
 */
@FunctionalInterface
public interface FrameEngineFactory extends Serializable {
    /** @param device {@code cpu} or {@code cuda:N} */
    FrameSessions create(String device, int subtaskIndex) throws Exception;
}
