package org.mstar.flink.frame;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.mstar.engine.frame.FrameInput;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameRequestKind;
import org.mstar.schemas.ReplayFrame;
import org.mstar.schemas.SessionMirror;

/**
 * One session as a subtask holds it: its clock, last output, replay window and the records it has not served, and
 * what ranks it for a ring (when it arrived in this subtask, its priority).
 */
final class Session {
    final String id;
    final long arrivalNanos = System.nanoTime();
    /** Whether its OPEN was served. */
    boolean opened;
    /** The priority its OPEN gave it, once served. */
    int priority;
    /** Whether it holds a ring in the engine now. */
    boolean resident;
    int nextFrame;
    int[] lastOutput = new int[0];
    /** The last inputs it stepped, oldest first, at most the replay depth. */
    final Deque<FrameInput> replay = new ArrayDeque<>();
    final Deque<FrameRequest> pending = new ArrayDeque<>();
    /** Whether keyed state lags behind it. */
    boolean dirty = true;

    Session(String id) {
        this.id = id;
    }

    static Session restored(String id, SessionMirror m) {
        Session s = new Session(id);
        s.opened = m.getOpen();
        s.priority = m.getPriority();
        s.nextFrame = m.getNextFrame();
        s.lastOutput = ints(m.getLastOutput());
        for (ReplayFrame f : m.getReplayFrames()) {
            s.replay.add(new FrameInput(id, f.getFrameIndex(), ints(f.getTokens()), f.getAction()));
        }
        s.pending.addAll(m.getPending());
        s.dirty = false;
        return s;
    }

    SessionMirror mirror() {
        List<ReplayFrame> frames = new ArrayList<>();
        for (FrameInput in : replay) frames.add(new ReplayFrame(in.framePos(), list(in.tokens()), in.action()));
        return new SessionMirror(opened, priority, nextFrame, list(lastOutput), frames, new ArrayList<>(pending));
    }

    /** Its priority for a ring: its OPEN's, which, before its OPEN is served, is the one it waits with (or 0). */
    int rankPriority() {
        FrameRequest head = pending.peekFirst();
        return opened || head == null || head.getKind() != FrameRequestKind.OPEN ? priority : priorityOf(head);
    }

    static int priorityOf(FrameRequest open) {
        return open.getPriority() == null ? 0 : open.getPriority();
    }

    /** Records a stepped input and its output, keeping the last {@code depth} inputs. */
    void stepped(FrameInput in, int framePos, int[] output, int depth) {
        replay.addLast(in);
        while (replay.size() > depth) replay.removeFirst();
        nextFrame = framePos;
        lastOutput = output;
        dirty = true;
    }

    /** The frame the replay starts at: its oldest kept input's, or the next frame when it kept none. */
    int replayStart() {
        return replay.isEmpty() ? nextFrame : replay.peekFirst().framePos();
    }

    static int[] ints(List<Integer> values) {
        return values.stream().mapToInt(Integer::intValue).toArray();
    }

    static List<Integer> list(int[] values) {
        List<Integer> out = new ArrayList<>(values.length);
        for (int v : values) out.add(v);
        return out;
    }
}
