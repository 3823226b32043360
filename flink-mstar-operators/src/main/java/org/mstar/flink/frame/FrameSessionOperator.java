package org.mstar.flink.frame;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.mstar.engine.Ranking;
import org.mstar.flink.StartUpFailures;
import org.mstar.engine.frame.FrameInput;
import org.mstar.engine.frame.FrameResult;
import org.mstar.engine.frame.FrameSessions;
import org.mstar.engine.frame.SessionRanking;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameEvent;
import org.mstar.schemas.FrameRequest;
import org.mstar.schemas.FrameRequestKind;
import org.mstar.schemas.FrameResponse;
import org.mstar.schemas.SessionMirror;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Serves frame sessions keyed by session id: an OPEN record makes a session resident (it claims one of the
 * engine's rings; beyond the resident count sessions wait, ranked as the engine core ranks requests, until one
 * closes), each OPEN or FRAME record yields the session's next frame, CLOSE frees its ring. Under
 * {@link org.mstar.engine.SchedulingPolicy#PRIORITY} ({@link FrameSessions#ranking()}) a waiting session that
 * outranks the lowest-ranked resident one takes its ring; that one waits, and gets a ring back as a restored session
 * does, by replay. A step serves the head record of every resident session in one batched engine step; steps run
 * as processing-time timers between records and barriers.
 *
 * <p>Before each barrier every session that changed is mirrored in keyed state ({@link SessionMirror}): its clock,
 * last output, the records not yet served and its last {@code replayDepth} inputs. A restore, at any parallelism,
 * takes every session of its key groups back and, when a session gets a ring again, rebuilds the ring by
 * replaying those inputs into empty rings, which reproduces it exactly; the session then continues where it was.
 * A record the session cannot take (no OPEN first, a gap in its frames, ids out of range) is a 400 ErrorEvent;
 * a failing engine step fails the task, and Flink restores the last checkpoint.
 */
public final class FrameSessionOperator extends AbstractStreamOperator<FrameResponse>
        implements OneInputStreamOperator<FrameRequest, FrameResponse> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(FrameSessionOperator.class);
    /** Name of the sessions' keyed state, whose keys a restore iterates. */
    static final String STATE = "frame-sessions";
    static final int BAD_REQUEST = 400;

    private final FrameEngineFactory engineFactory;
    private final String device;

    private transient FrameSessions engine;
    private transient ValueState<SessionMirror> mirrors;
    /** This subtask's sessions in arrival order, which is also the order FCFS gives waiting ones a ring. */
    private transient Map<String, Session> sessions;
    private transient Ranking<Session> ranking;
    private transient int replayDepth;
    private transient boolean restored;
    private transient boolean stepScheduled;

    FrameSessionOperator(StreamOperatorParameters<FrameResponse> parameters, FrameEngineFactory engineFactory,
                         String device) {
        super(parameters);
        this.engineFactory = engineFactory;
        this.device = device;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        mirrors = context.getKeyedStateStore().getState(
                new ValueStateDescriptor<>(STATE, new AvroTypeInfo<>(SessionMirror.class)));
        restored = context.isRestored();
    }

    @Override
    public void open() throws Exception {
        super.open();
        sessions = new LinkedHashMap<>();
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        try {
            engine = engineFactory.create(device, subtask);
        } catch (Exception e) {
            throw StartUpFailures.atEngineBuild(e);
        }
        replayDepth = engine.config().replayDepth();
        SessionRanking rule = engine.ranking();
        ranking = new Ranking<>(rule.policy(), rule.agingStep(), s -> s.arrivalNanos, Session::rankPriority);
        if (restored) {
            for (String id : keys()) {
                setCurrentKey(id);
                SessionMirror m = mirrors.value();
                if (m != null) sessions.put(id, Session.restored(id, m));
            }
            LOG.info("Frame sessions subtask {} took back {} sessions", subtask, sessions.size());
        }
        scheduleStep();
    }

    @Override
    public void processElement(StreamRecord<FrameRequest> element) {
        FrameRequest r = element.getValue();
        Session s = sessions.computeIfAbsent(r.getSessionId(), Session::new);
        s.pending.addLast(r);
        s.dirty = true;
        scheduleStep();
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        super.prepareSnapshotPreBarrier(checkpointId);
        for (Session s : sessions.values()) {
            if (s.dirty) {
                setCurrentKey(s.id);
                mirrors.update(s.mirror());
                s.dirty = false;
            }
        }
    }

    /** End of input: serves every record a ring can still be found for. */
    @Override
    public void finish() throws Exception {
        while (step()) {
            // each step serves at least one record
        }
        super.finish();
    }

    @Override
    public void close() throws Exception {
        if (engine != null) {
            engine.close();
            engine = null;
        }
        super.close();
    }

    // ------------------------------------------------------------------------

    private void scheduleStep() {
        if (!stepScheduled) {
            stepScheduled = true;
            getProcessingTimeService().registerTimer(getProcessingTimeService().getCurrentProcessingTime(), t -> {
                stepScheduled = false;
                if (step()) scheduleStep();
            });
        }
    }

    /** Admits waiting sessions while rings are free, then serves every resident session's head record. */
    boolean step() throws Exception {
        boolean progress = admit();
        List<Session> stepped = new ArrayList<>();
        List<FrameInput> batch = new ArrayList<>();
        for (Session s : List.copyOf(sessions.values())) {
            if (!s.resident || s.pending.isEmpty()) continue;
            FrameRequest r = s.pending.peekFirst();
            FrameInput in;
            if (r.getKind() == FrameRequestKind.CLOSE) {
                endSession(s);
                progress = true;
                continue;
            } else if (r.getKind() == FrameRequestKind.OPEN) {
                if (s.opened) {
                    refuse(s, "kind: session " + s.id + " is open already");
                    progress = true;
                    continue;
                }
                in = new FrameInput(s.id, r.getFrameIndex(), Session.ints(r.getTokens()), r.getAction());
            } else {
                int[] tokens = r.getTokens().isEmpty() ? s.lastOutput : Session.ints(r.getTokens());
                in = new FrameInput(s.id, r.getFrameIndex(), tokens, r.getAction());
            }
            String why = engine.refusal(in);
            if (why != null) {
                refuse(s, why);
                progress = true;
                continue;
            }
            stepped.add(s);
            batch.add(in);
        }
        if (batch.isEmpty()) return progress;
        List<FrameResult> results = engine.step(batch, false);
        for (int i = 0; i < results.size(); i++) {
            Session s = stepped.get(i);
            FrameResult out = results.get(i);
            FrameRequest served = s.pending.removeFirst();
            if (!s.opened) {
                s.priority = Session.priorityOf(served);
                s.opened = true;
            }
            s.stepped(batch.get(i), out.framePos(), out.tokens(), replayDepth);
            emit(new FrameEvent(s.id, out.framePos(), Session.list(out.tokens())));
        }
        return true;
    }

    /**
     * Gives rings to waiting sessions in rank order while the engine has room or, under PRIORITY, a lower-ranked
     * session gives its ring up, replaying the inputs of those that had one before; answers what a waiting session
     * can be answered without one.
     */
    private boolean admit() throws Exception {
        boolean progress = false;
        List<Session> replaying = new ArrayList<>();
        List<Session> byRank = new ArrayList<>(sessions.values());
        byRank.sort(ranking.order()); // stable: FCFS keeps the arrival order the map has
        for (Session s : byRank) {
            if (s.resident || s.pending.isEmpty()) continue;
            FrameRequest head = s.pending.peekFirst();
            if (head.getKind() == FrameRequestKind.CLOSE) {
                endSession(s);
                progress = true;
            } else if (!s.opened && head.getKind() != FrameRequestKind.OPEN) {
                refuse(s, "kind: session " + s.id + " is not open; its first record must be OPEN");
                progress = true;
            } else if (engine.hasRoom() || (ranking.preempts() && preemptFor(s))) {
                if (s.opened) {
                    engine.openAt(s.id, s.replayStart());
                    replaying.add(s);
                } else {
                    engine.open(s.id);
                }
                s.resident = true;
                progress = true;
            }
        }
        replay(replaying);
        return progress;
    }

    /**
     * Frees the ring of the lowest-ranked resident session when {@code head} outranks it and the policy preempts:
     * that one waits, with its replay window, as a restored session does.
     */
    private boolean preemptFor(Session head) {
        List<Session> resident = sessions.values().stream().filter(s -> s.resident).toList();
        List<Session> victims = ranking.victims(head, resident, 0, 1, s -> 1);
        for (Session v : victims) {
            engine.close(v.id);
            v.resident = false;
        }
        return !victims.isEmpty();
    }

    /** Steps each session's kept inputs again, batched across sessions, discarding the outputs. */
    private void replay(List<Session> replaying) {
        List<Iterator<FrameInput>> inputs = replaying.stream().map(s -> List.copyOf(s.replay).iterator()).toList();
        while (true) {
            List<FrameInput> batch = new ArrayList<>();
            for (Iterator<FrameInput> it : inputs) if (it.hasNext()) batch.add(it.next());
            if (batch.isEmpty()) return;
            engine.step(batch, false);
        }
    }

    /** Answers the session's head record with a 400; a session whose OPEN was refused gives its ring back. */
    private void refuse(Session s, String why) {
        s.pending.removeFirst();
        s.dirty = true;
        emit(new ErrorEvent(s.id, BAD_REQUEST, why));
        if (!s.opened) {
            if (s.resident) engine.close(s.id);
            s.resident = false;
            if (s.pending.isEmpty()) forget(s);
        }
    }

    /**
     * Serves a CLOSE: frees the ring; records after it start the session over, behind every session that waits
     * already (re-inserted, so the arrival order puts it last).
     */
    private void endSession(Session s) {
        s.pending.removeFirst();
        if (s.resident) engine.close(s.id);
        if (s.pending.isEmpty()) {
            forget(s);
        } else {
            Session fresh = new Session(s.id);
            fresh.pending.addAll(s.pending);
            sessions.remove(s.id);
            sessions.put(s.id, fresh);
        }
    }

    private void forget(Session s) {
        sessions.remove(s.id);
        setCurrentKey(s.id);
        mirrors.clear();
    }

    private void emit(Object event) {
        output.collect(new StreamRecord<>(new FrameResponse(event)));
    }

    /** The keys of this subtask's key groups that hold a session, each once. */
    private List<String> keys() throws Exception {
        KeyedStateBackend<String> backend = getKeyedStateBackend();
        // collected first: RocksDB's key iterator must not see the state change underneath it
        try (Stream<String> keys = backend.getKeys(STATE, VoidNamespace.INSTANCE)) {
            return keys.distinct().toList();
        }
    }
}
