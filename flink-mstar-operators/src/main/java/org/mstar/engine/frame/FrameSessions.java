package org.mstar.engine.frame;

import java.util.List;
import org.mstar.model.frame.FrameModelConfig;

/** What a session operator drives: resident sessions and their batched frame steps ({@link FrameEngine}). */
public interface FrameSessions extends AutoCloseable {
    FrameModelConfig config();

    /** How sessions waiting for a ring rank, and whether one may take a resident session's ring. */
    SessionRanking ranking();

    /** Whether another session can be made resident. */
    boolean hasRoom();

    /** Makes the session resident; its first frame is 0. */
    void open(String sessionId);

    /** Makes the session resident with empty rings whose first frame is {@code firstFrame} (for a replay). */
    void openAt(String sessionId, int firstFrame);

    /** Frees the session's rings. */
    void close(String sessionId);

    /** Why {@code in} cannot be part of a step, or null. */
    String refusal(FrameInput in);

    /** One batched step over distinct resident sessions: each input's next frame, in order. */
    List<FrameResult> step(List<FrameInput> inputs, boolean keepLogits);

    @Override
    void close();
}
