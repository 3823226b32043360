package org.mstar.engine.frame;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.mstar.device.ComputeOps;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.model.frame.FrameOutput;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;
import org.mstar.resources.kv.ring.RingAttentionRows;
import org.mstar.resources.kv.ring.RingKVManager;
import org.mstar.resources.kv.ring.RingSessionState;

/**
 * Steps many sessions' frames in one batch over a ring KV: each open session holds one of
 * {@code residentSessions} rings; a step admits its frames (continuity is the ring's terminal check), appends
 * every layer's K/V to each session's tail, attends each frame over the rows its session sees and commits,
 * which keeps the frame in each layer's history on that layer's write steps.
 *
 * <p>Which session holds a ring is its operator's to decide, ranked as the engine core ranks requests
 * ({@link #ranking()}, {@code org.mstar.engine.Ranking}).
 */
public final class FrameEngine implements FrameSessions {
    private static final String WALK = "frame";

    private final FrameModel model;
    private final FrameModelConfig config;
    private final RingKVManager ring;
    private final SessionRanking ranking;
    private final Set<String> open = new LinkedHashSet<>();
    /** Whether closing the engine also closes the model and its device. */
    private final boolean ownsModel;

    /** An engine over {@code model}, which stays with the caller; its sessions wait for a ring in arrival order. */
    public FrameEngine(FrameModel model, int residentSessions) {
        this(model, residentSessions, SessionRanking.FCFS, false);
    }

    /** An engine that closes {@code model} and its device when it closes (one engine per operator subtask). */
    public static FrameEngine owning(FrameModel model, int residentSessions) {
        return owning(model, residentSessions, SessionRanking.FCFS);
    }

    /** {@link #owning(FrameModel, int)} whose sessions rank for a ring by {@code ranking}. */
    public static FrameEngine owning(FrameModel model, int residentSessions, SessionRanking ranking) {
        return new FrameEngine(model, residentSessions, ranking, true);
    }

    private FrameEngine(FrameModel model, int residentSessions, SessionRanking ranking, boolean ownsModel) {
        this.ownsModel = ownsModel;
        this.ranking = ranking;
        this.model = model;
        this.config = model.config();
        this.ring = RingKVManager.batched(config.ringConfig(residentSessions), model.device(), model.activations());
    }

    @Override public FrameModelConfig config() { return config; }
    @Override public SessionRanking ranking() { return ranking; }
    public int residentCapacity() { return ring.config().numSessions(); }
    @Override public boolean hasRoom() { return open.size() < residentCapacity(); }

    /** The frame position the session's next input must carry: one past its last committed frame. */
    public int nextFrame(String sessionId) {
        requireOpen(sessionId);
        return ring.lastFrame(sessionId) + 1;
    }

    /** Makes the session resident; its first frame is 0. */
    @Override
    public void open(String sessionId) {
        openAt(sessionId, 0);
    }

    /**
     * Makes the session resident with an empty ring whose first frame is {@code firstFrame}: replaying a session's
     * last {@link FrameModelConfig#replayDepth()} inputs from there rebuilds its rings exactly.
     */
    @Override
    public void openAt(String sessionId, int firstFrame) {
        if (open.contains(sessionId)) throw new IllegalStateException("session " + sessionId + " is already open");
        if (!hasRoom()) throw new IllegalStateException("all " + residentCapacity() + " resident sessions are taken");
        ring.ingestRequest(sessionId, null);
        ring.startAt(sessionId, firstFrame);
        open.add(sessionId);
    }

    /** Makes a session resident again from a snapshot; its next frame is the snapshot's last + 1. */
    public void restore(String sessionId, RingSessionState state) {
        open(sessionId);
        try {
            ring.loadState(sessionId, state);
        } catch (RuntimeException e) {
            close(sessionId);
            throw e;
        }
    }

    /** The session's ring (every layer's rows and flags) and frame clock. */
    public RingSessionState snapshot(String sessionId) {
        requireOpen(sessionId);
        return ring.getState(sessionId);
    }

    /** Zeroes the session's ring and hands it back. */
    @Override
    public void close(String sessionId) {
        if (open.remove(sessionId)) ring.removeRequest(sessionId);
    }

    /** Why the engine would refuse {@code in} as part of a step, or null when it is acceptable. */
    @Override
    public String refusal(FrameInput in) {
        if (!open.contains(in.sessionId())) return "session " + in.sessionId() + " is not open";
        int expected = ring.lastFrame(in.sessionId()) + 1;
        if (in.framePos() != expected) {
            return "frame discontinuity for session " + in.sessionId() + ": expected frame " + expected + ", got " + in.framePos();
        }
        int[] tokens = in.tokens();
        if (tokens.length != config.tokensPerFrame()) {
            return "a frame has " + config.tokensPerFrame() + " tokens, got " + tokens.length;
        }
        for (int t : tokens) {
            if (t < 0 || t >= config.vocabSize()) return "token id " + t + " outside [0, " + config.vocabSize() + ")";
        }
        if (in.action() < 0 || in.action() >= config.numActions()) {
            return "action " + in.action() + " outside [0, " + config.numActions() + ")";
        }
        return null;
    }

    /**
     * One batched step: every input's next frame, in input order. Inputs name distinct open sessions and pass
     * {@link #refusal}; anything else is refused whole with an {@link IllegalArgumentException}.
     */
    @Override
    public List<FrameResult> step(List<FrameInput> inputs, boolean keepLogits) {
        Set<String> seen = new HashSet<>();
        for (FrameInput in : inputs) {
            String why = refusal(in);
            if (why != null) throw new IllegalArgumentException(why);
            if (!seen.add(in.sessionId())) throw new IllegalArgumentException("session " + in.sessionId() + " twice in one step");
        }
        if (inputs.isEmpty()) return List.of();
        int tpf = config.tokensPerFrame();
        List<String> rids = inputs.stream().map(FrameInput::sessionId).toList();
        List<RingKVStep.Frame> frames = inputs.stream().map(in -> new RingKVStep.Frame(in.sessionId(), in.framePos())).toList();
        RingKVStep ringStep = new RingKVStep(List.of(), frames);
        StepContext ctx = new StepContext(rids, WALK, 0, false);
        AdmitOutcome admitted = ring.admit(ringStep, ctx);
        if (!admitted.ok()) throw new IllegalStateException("ring refused the step: " + admitted.reason().message());
        int[] tokens = new int[inputs.size() * tpf];
        int[] actions = new int[inputs.size()];
        int[] positions = new int[inputs.size()];
        for (int i = 0; i < inputs.size(); i++) {
            System.arraycopy(inputs.get(i).tokens(), 0, tokens, i * tpf, tpf);
            actions[i] = inputs.get(i).action();
            positions[i] = inputs.get(i).framePos();
        }
        List<RingAttentionRows> layers = new ArrayList<>();
        FrameOutput out;
        try {
            for (int l = 0; l < config.numLayers(); l++) layers.add(ring.attentionRows(l, frames, model.smScale()));
            ComputeOps ops = model.device().ops();
            out = model.forward(tokens, actions, positions, (layer, q, k, v, attnOut) -> {
                RingAttentionRows rows = layers.get(layer);
                ops.ringAppend(k, v, ring.buffer(layer), rows.appendRows());
                ops.ringAttention(q, ring.buffer(layer), rows.plan(), attnOut);
            }, keepLogits);
        } catch (RuntimeException e) {
            ring.rollbackAdmit(ringStep, ctx);
            throw e;
        } finally {
            layers.forEach(RingAttentionRows::close);
        }
        ring.commit(ringStep, ctx);
        List<FrameResult> results = new ArrayList<>();
        int vocab = config.vocabSize();
        for (int i = 0; i < inputs.size(); i++) {
            float[] logits = out.logits() == null ? null
                    : Arrays.copyOfRange(out.logits(), i * tpf * vocab, (i + 1) * tpf * vocab);
            results.add(new FrameResult(rids.get(i), positions[i] + 1, Arrays.copyOfRange(out.tokens(), i * tpf, (i + 1) * tpf),
                    logits));
        }
        return results;
    }

    private void requireOpen(String sessionId) {
        if (!open.contains(sessionId)) throw new IllegalStateException("session " + sessionId + " is not open");
    }

    /** Frees the rings, and the model and its device when the engine owns them. */
    @Override
    public void close() {
        open.clear();
        ring.cleanup();
        if (ownsModel) {
            model.close();
            model.device().close();
        }
    }
}
