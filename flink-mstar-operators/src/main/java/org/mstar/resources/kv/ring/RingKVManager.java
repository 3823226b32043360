package org.mstar.resources.kv.ring;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.Admission;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.Planning;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVStep;
import org.mstar.resources.StepContext;

/**
 * A fixed horizon of past frames per layer and session, overwritten in place: storage is allocated
 * once at build, nothing is reserved per step, nothing is paged or evicted.
 *
 * <p>Each layer's buffer is {@code [totalSessions * capacity, 2, kvHeads, headDim]} (index 0 of the
 * second axis is K, 1 is V), token-major so that one session is one contiguous run of rows: zeroing,
 * snapshotting and restoring a session are single copies. The last session is the scratch session
 * padding rows park on; it is never handed to a request. Every session's tail is marked written from
 * the start, so the frame being computed always sees itself.
 *
 * <p>A request ingests without a session; its first admitted frame claims the lowest free one.
 * Frames must arrive in order ({@code lastFrame + 1}, starting at 0): a gap, a repeat or a full house
 * is a terminal refusal, as nothing a retry could change would make the step valid.
 */
public final class RingKVManager implements Resource, Admission, Planning<Object> {
    /** Frame clock and session of one ingested request; {@code session} is -1 until claimed. */
    private static final class Clock {
        int session = -1;
        int lastFrame = -1;
    }

    private final RingKVConfig config;
    private final Device device;
    private final DType dtype;
    private final List<RingGeometry> geometry;
    private final List<Tensor> buffers = new ArrayList<>();
    private final List<boolean[]> written = new ArrayList<>();
    private final boolean[] taken;
    /** The step's session on the device, filled in place at plan so captured graphs keep reading one address. */
    private final Tensor stepSession;
    private final Map<String, Clock> clocks = new HashMap<>();
    /** Requests the last admit gave a session, so a rollback returns exactly those. */
    private final Set<String> freshClaims = new LinkedHashSet<>();
    /** Distinct requests one step may advance: 1 where a captured step reads its session from one scalar; more when batched. */
    private final int maxSessionsPerStep;

    RingKVManager(RingKVConfig config, Device device, DType dtype) {
        this(config, device, dtype, 1);
    }

    private RingKVManager(RingKVConfig config, Device device, DType dtype, int maxSessionsPerStep) {
        if (maxSessionsPerStep < 1 || maxSessionsPerStep > config.numSessions()) {
            throw new IllegalArgumentException("sessions per step must be in [1, num_sessions=" + config.numSessions()
                    + "], got " + maxSessionsPerStep);
        }
        this.maxSessionsPerStep = maxSessionsPerStep;
        this.config = config;
        this.device = device;
        this.dtype = dtype;
        this.geometry = config.layers().stream().map(l -> RingGeometry.of(config.tokensPerFrame(), l)).toList();
        this.taken = new boolean[config.numSessions()];
        this.stepSession = device.zeros(DType.I32, 1);
        for (RingGeometry g : geometry) {
            long rows = (long) config.totalSessions() * g.capacity();
            buffers.add(device.zeros(dtype, rows, 2, config.numKvHeads(), config.headDim()));
            boolean[] w = new boolean[Math.toIntExact(rows)];
            for (int s = 0; s < config.totalSessions(); s++) {
                markTail(g, w, s);
            }
            written.add(w);
        }
    }

    /**
     * A manager whose steps may advance up to every resident session at once: each frame's attention reads its
     * own rows through {@link #attentionRows}, so nothing per step is a single-session device scalar.
     */
    public static RingKVManager batched(RingKVConfig config, Device device, DType dtype) {
        return new RingKVManager(config, device, dtype, config.numSessions());
    }

    public RingKVConfig config() { return config; }
    public RingGeometry geometry(int layer) { return geometry.get(layer); }
    /** The layer's buffer, {@code [totalSessions * capacity, 2, kvHeads, headDim]}. */
    public Tensor buffer(int layer) { return buffers.get(layer); }
    /** The session padding rows park on. */
    public int scratchSession() { return config.numSessions(); }

    /** The request's session, or -1 when it holds none (or is unknown). */
    public int sessionOf(String rid) {
        Clock c = clocks.get(rid);
        return c == null ? -1 : c.session;
    }

    /** The request's last committed frame, -1 before its first (or when unknown). */
    public int lastFrame(String rid) {
        Clock c = clocks.get(rid);
        return c == null ? -1 : c.lastFrame;
    }

    public int freeSessions() {
        int n = 0;
        for (boolean t : taken) if (!t) n++;
        return n;
    }

    // ---------------------------------------------------------------- requests

    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        clocks.putIfAbsent(rid, new Clock());
    }

    /**
     * Starts an ingested request's clock at {@code firstFrame} instead of 0, before its first frame: a session
     * rebuilt by replaying its last frames continues their positions.
     */
    public void startAt(String rid, int firstFrame) {
        Clock c = clocks.get(rid);
        if (c == null) throw new IllegalStateException("request " + rid + " was never ingested");
        if (c.session >= 0 || c.lastFrame >= 0) throw new IllegalStateException("request " + rid + " has started already");
        if (firstFrame < 0) throw new IllegalArgumentException("first frame must be >= 0, got " + firstFrame);
        c.lastFrame = firstFrame - 1;
    }

    /** The session is all a request holds, so any reset zeroes it and hands it back, {@code free} or not. */
    @Override
    public void resetRequest(String rid, boolean free) {
        Clock c = clocks.get(rid);
        if (c != null) release(c);
    }

    @Override
    public void removeRequest(String rid) {
        Clock c = clocks.remove(rid);
        if (c != null) release(c);
        freshClaims.remove(rid);
    }

    // ---------------------------------------------------------------- step cycle

    /** Every check runs before any claim, so a refusal leaves nothing behind. */
    @Override
    public AdmitOutcome admit(ResourceStep step, StepContext ctx) {
        RingKVStep ring = requireRingStep(step);
        freshClaims.clear();
        Set<String> rids = new LinkedHashSet<>(ctx.requestIds());
        if (rids.size() > maxSessionsPerStep) {
            String most = maxSessionsPerStep == 1 ? "one session" : "at most " + maxSessionsPerStep + " sessions";
            return refuse("a ring step advances " + most + ", the batch holds " + rids.size() + " requests", Set.of());
        }
        Map<String, Integer> frames = framesByRid(ring);
        int newSessions = 0;
        for (String rid : rids) {
            Clock c = clocks.get(rid);
            if (c == null) return refuse("request " + rid + " was never ingested", Set.of(rid));
            Integer fp = frames.get(rid);
            if (fp == null) return refuse("the step declares no frame for request " + rid, Set.of(rid));
            if (fp != c.lastFrame + 1) {
                return refuse("frame discontinuity for request " + rid + ": expected frame " + (c.lastFrame + 1)
                        + ", got " + fp, Set.of(rid));
            }
            if (c.session < 0) newSessions++;
        }
        if (newSessions > freeSessions()) {
            return refuse("no free ring session: " + newSessions + " needed, " + freeSessions() + " free of "
                    + config.numSessions(), rids);
        }
        for (String rid : rids) {
            Clock c = clocks.get(rid);
            if (c.session < 0) {
                c.session = claimLowest();
                freshClaims.add(rid);
            }
        }
        return AdmitOutcome.OK;
    }

    @Override
    public void rollbackAdmit(ResourceStep step, StepContext ctx) {
        for (String rid : freshClaims) {
            Clock c = clocks.get(rid);
            if (c != null) release(c);
        }
        freshClaims.clear();
    }

    @Override
    public Object plan(ResourceStep step, StepContext ctx) {
        Map<String, Integer> frames = framesByRid(requireRingStep(step));
        List<String> padded = ctx.paddedRequestIds();
        Set<String> real = new LinkedHashSet<>(ctx.requestIds());
        int[] sessions = new int[padded.size()];
        int[] positions = new int[padded.size()];
        for (int i = 0; i < padded.size(); i++) {
            String rid = padded.get(i);
            Clock c = clocks.get(rid);
            boolean parked = !real.contains(rid) || c == null || c.session < 0;
            sessions[i] = parked ? scratchSession() : c.session;
            positions[i] = parked ? -1 : frames.get(rid);
        }
        int session = sessions.length == 0 ? scratchSession() : sessions[0];
        ByteBuffer bytes = ByteBuffer.allocate(Integer.BYTES).order(ByteOrder.LITTLE_ENDIAN).putInt(0, session);
        device.copyFromHost(bytes, stepSession);
        return new RingKVPlan(sessions, positions, stepSession);
    }

    /**
     * Write a frame's K/V, {@code [tokensPerFrame, 2, kvHeads, headDim]} in the buffer's dtype, into the
     * session's tail at {@code layer}: every frame is computed there; {@link #commit} keeps it in history.
     */
    public void writeFrame(int layer, int session, Tensor kv) {
        if (session < 0 || session >= config.totalSessions()) {
            throw new IllegalArgumentException("session " + session + " outside [0, " + config.totalSessions() + ")");
        }
        RingGeometry g = geometry.get(layer);
        try (Tensor tail = buffers.get(layer).rows(g.tailStart(session), g.tokensPerFrame())) {
            if (!Arrays.equals(kv.shape(), tail.shape()) || kv.dtype() != tail.dtype()) {
                throw new IllegalArgumentException("a frame's K/V is " + Arrays.toString(tail.shape()) + " " + tail.dtype()
                        + ", got " + Arrays.toString(kv.shape()) + " " + kv.dtype());
            }
            device.copy(kv, tail);
        }
    }

    /**
     * Advance each real request's clock; a layer keeps the frame in history only on its write steps,
     * by copying the tail into the frame's slot (ordered after the forward on the device's stream).
     */
    @Override
    public void commit(ResourceStep step, StepContext ctx) {
        Map<String, Integer> frames = framesByRid(requireRingStep(step));
        for (String rid : new LinkedHashSet<>(ctx.requestIds())) {
            Clock c = clocks.get(rid);
            Integer fp = frames.get(rid);
            if (c == null || c.session < 0 || fp == null) continue;
            for (int layer = 0; layer < geometry.size(); layer++) {
                RingGeometry g = geometry.get(layer);
                if (g.isWriteStep(fp)) {
                    int start = g.ringStart(c.session, fp);
                    Tensor buffer = buffers.get(layer);
                    try (Tensor tail = buffer.rows(g.tailStart(c.session), g.tokensPerFrame());
                         Tensor slot = buffer.rows(start, g.tokensPerFrame())) {
                        device.copy(tail, slot);
                    }
                    Arrays.fill(written.get(layer), start, start + g.tokensPerFrame(), true);
                }
            }
            c.lastFrame = fp;
        }
        freshClaims.clear();
    }

    /** After capture every dummy must have been reset: no session held, no frame committed. */
    public void postWarmupValidate() {
        int held = config.numSessions() - freeSessions();
        if (held > 0) throw new IllegalStateException(held + " ring sessions still held after warmup");
        for (Map.Entry<String, Clock> e : clocks.entrySet()) {
            if (e.getValue().lastFrame >= 0) {
                throw new IllegalStateException("request " + e.getKey() + " committed frames during warmup");
            }
        }
        for (int layer = 0; layer < geometry.size(); layer++) {
            RingGeometry g = geometry.get(layer);
            for (int s = 0; s < config.totalSessions(); s++) {
                for (int row = g.sessionBase(s); row < g.tailStart(s); row++) {
                    if (written.get(layer)[row]) {
                        throw new IllegalStateException("layer " + layer + " session " + s + " has history written during warmup");
                    }
                }
            }
        }
    }

    /** Frees every layer's buffer and the step scalar; the manager is unusable afterwards. */
    @Override
    public void cleanup() {
        buffers.forEach(Tensor::close);
        buffers.clear();
        stepSession.close();
    }

    // ---------------------------------------------------------------- visibility

    /**
     * Rows of {@code layer}'s buffer that the request's frame {@code framePos} attends: this session's
     * written rows (its history and its tail), minus the history slot the frame is about to overwrite
     * when it is a write step at this layer's stride. Ascending.
     */
    public int[] visibleRows(String rid, int layer, int framePos) {
        Clock c = clocks.get(rid);
        if (c == null || c.session < 0) throw new IllegalStateException("request " + rid + " holds no ring session");
        RingGeometry g = geometry.get(layer);
        int base = g.sessionBase(c.session);
        int overwritten = g.isWriteStep(framePos) ? g.ringStart(c.session, framePos) : -1;
        boolean[] w = written.get(layer);
        int[] out = new int[g.capacity()];
        int n = 0;
        for (int row = base; row < base + g.capacity(); row++) {
            boolean replaced = overwritten >= 0 && row >= overwritten && row < overwritten + g.tokensPerFrame();
            if (w[row] && !replaced) out[n++] = row;
        }
        return Arrays.copyOf(out, n);
    }

    /**
     * The tensors of {@code layer} for a step's frames in order: each frame's tail rows to append its K/V to, and
     * the ring attention plan, each frame's {@code tokensPerFrame} query rows attending its {@link #visibleRows}.
     * The caller closes it after the attention that reads it.
     */
    public RingAttentionRows attentionRows(int layer, List<RingKVStep.Frame> frames, float smScale) {
        int tpf = config.tokensPerFrame();
        int[] append = new int[frames.size() * tpf];
        int[] qoIndptr = new int[frames.size() + 1];
        int[] kvIndptr = new int[frames.size() + 1];
        List<int[]> lists = new ArrayList<>();
        int maxKv = 0;
        for (int i = 0; i < frames.size(); i++) {
            int[] rows = visibleRows(frames.get(i).requestId(), layer, frames.get(i).framePos());
            lists.add(rows);
            int tail = geometry.get(layer).tailStart(sessionOf(frames.get(i).requestId()));
            for (int t = 0; t < tpf; t++) append[i * tpf + t] = tail + t;
            qoIndptr[i + 1] = qoIndptr[i] + tpf;
            kvIndptr[i + 1] = kvIndptr[i] + rows.length;
            maxKv = Math.max(maxKv, rows.length);
        }
        int[] all = new int[kvIndptr[frames.size()]];
        for (int i = 0; i < lists.size(); i++) System.arraycopy(lists.get(i), 0, all, kvIndptr[i], lists.get(i).length);
        return new RingAttentionRows(device, append, qoIndptr, kvIndptr, all, tpf, maxKv, smScale);
    }

    // ---------------------------------------------------------------- state

    /** A snapshot of the request's session: frame clock, rows and written flags of every layer. */
    public RingSessionState getState(String rid) {
        Clock c = clocks.get(rid);
        if (c == null || c.session < 0) throw new IllegalStateException("request " + rid + " holds no ring session");
        List<byte[]> rows = new ArrayList<>();
        List<boolean[]> flags = new ArrayList<>();
        for (int layer = 0; layer < geometry.size(); layer++) {
            RingGeometry g = geometry.get(layer);
            try (Tensor view = sessionRows(layer, c.session)) {
                byte[] bytes = new byte[Math.toIntExact(view.byteSize())];
                device.copyToHost(view, ByteBuffer.wrap(bytes));
                rows.add(bytes);
            }
            int base = g.sessionBase(c.session);
            flags.add(Arrays.copyOfRange(written.get(layer), base, base + g.capacity()));
        }
        return new RingSessionState(c.lastFrame, rows, flags);
    }

    /**
     * Restore a snapshot onto an ingested request, claiming the lowest free session if it holds none;
     * its next frame is then {@code state.lastFrame() + 1}.
     */
    public void loadState(String rid, RingSessionState state) {
        Clock c = clocks.get(rid);
        if (c == null) throw new IllegalStateException("request " + rid + " was never ingested");
        if (state.layerRows().size() != geometry.size()) {
            throw new IllegalArgumentException("state has " + state.layerRows().size() + " layers, the ring " + geometry.size());
        }
        for (int layer = 0; layer < geometry.size(); layer++) {
            int rows = geometry.get(layer).capacity();
            long bytes = (long) rows * 2 * config.numKvHeads() * config.headDim() * dtype.bytes();
            if (state.layerRows().get(layer).length != bytes || state.layerWritten().get(layer).length != rows) {
                throw new IllegalArgumentException("layer " + layer + " state does not match the ring's geometry");
            }
        }
        if (c.session < 0) {
            if (freeSessions() == 0) throw new IllegalStateException("no free ring session to restore request " + rid + " into");
            c.session = claimLowest();
        }
        for (int layer = 0; layer < geometry.size(); layer++) {
            RingGeometry g = geometry.get(layer);
            try (Tensor view = sessionRows(layer, c.session)) {
                device.copyFromHost(ByteBuffer.wrap(state.layerRows().get(layer)), view);
            }
            System.arraycopy(state.layerWritten().get(layer), 0, written.get(layer), g.sessionBase(c.session), g.capacity());
        }
        c.lastFrame = state.lastFrame();
    }

    // ---------------------------------------------------------------- internals

    private static RingKVStep requireRingStep(ResourceStep step) {
        if (!(step instanceof RingKVStep ring)) {
            throw new IllegalArgumentException("a ring KV cache needs a RingKVStep, got "
                    + (step == null ? "null" : step.getClass().getSimpleName()));
        }
        return ring;
    }

    private static Map<String, Integer> framesByRid(RingKVStep step) {
        Map<String, Integer> frames = new HashMap<>();
        for (RingKVStep.Frame f : step.frames()) frames.put(f.requestId(), f.framePos());
        return frames;
    }

    private static AdmitOutcome refuse(String message, Set<String> rids) {
        return AdmitOutcome.refused(new AdmitRuntimeError(message, rids));
    }

    private int claimLowest() {
        for (int s = 0; s < taken.length; s++) {
            if (!taken[s]) {
                taken[s] = true;
                return s;
            }
        }
        throw new IllegalStateException("no free ring session");
    }

    /** Zero the session, clear its history flags and its clock, and hand it back. */
    private void release(Clock c) {
        if (c.session >= 0) {
            for (int layer = 0; layer < geometry.size(); layer++) {
                RingGeometry g = geometry.get(layer);
                try (Tensor view = sessionRows(layer, c.session)) {
                    device.copyFromHost(ByteBuffer.wrap(new byte[Math.toIntExact(view.byteSize())]), view);
                }
                boolean[] w = written.get(layer);
                Arrays.fill(w, g.sessionBase(c.session), g.tailStart(c.session), false);
                markTail(g, w, c.session);
            }
            taken[c.session] = false;
            c.session = -1;
        }
        c.lastFrame = -1;
    }

    private Tensor sessionRows(int layer, int session) {
        RingGeometry g = geometry.get(layer);
        return buffers.get(layer).rows(g.sessionBase(session), g.capacity());
    }

    private static void markTail(RingGeometry g, boolean[] w, int session) {
        Arrays.fill(w, g.tailStart(session), g.tailStart(session) + g.tokensPerFrame(), true);
    }
}
