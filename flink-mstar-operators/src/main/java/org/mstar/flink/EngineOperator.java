package org.mstar.flink;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;
import org.apache.flink.api.common.operators.MailboxExecutor;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.PrefillHandoff;
import org.mstar.engine.RequestFailure;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.RequestMirror;
import org.mstar.schemas.Response;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the engine operators share: one {@link GenerationEngine} per subtask, keyed by request id, whose steps run
 * in the task's mailbox and whose step results become {@link Response}s; the live requests, each mirrored in keyed
 * state ({@link RequestMirrors}) under the subclass's state name; the queue timeout; the engine's start, built off
 * the task thread ({@link EngineStart}) and taken up by the first call that needs it; and its end, drained by
 * {@link #finish} and closed by {@link #close}, also after a failure. A subclass says what arrives, how a restore
 * takes its requests back, what a finished prefill emits and when the step after a step is due.
 *
 * @param <IN> what the operator's input carries
 */
@Internal
abstract class EngineOperator<IN> extends AbstractStreamOperator<Response>
        implements OneInputStreamOperator<IN, Response> {
    private static final long serialVersionUID = 1L;

    private static final Logger LOG = LoggerFactory.getLogger(EngineOperator.class);

    /**
     * How long the next step waits after a step before which requests arrived. Flink runs a due timer before the
     * next input record, so back-to-back steps let about one record in between them, and a burst of N requests
     * would take N steps to admit, each a small prefill beside the running decodes. While requests keep arriving,
     * this gap takes in the rest of the burst; once none arrive, steps run back to back again.
     */
    static final long ARRIVAL_WINDOW_MILLIS = 1;

    /**
     * How long a burst may hold a due step back while its requests are still being taken in (the latest arrived at
     * most {@link #ARRIVAL_WINDOW_MILLIS} ago by the millisecond clock) and the queue has room. A step between the records of one burst admits only
     * what arrived so far: 1000 requests sent at once then reached the engine over 4 s of small prefills on an H100
     * (8B, 128/128), where the bare engine, given them all, ran eight full ones. About the time to take in a
     * thousand requests; a steady flow of requests never holds a step back longer.
     */
    static final long BURST_WINDOW_MILLIS = 20;

    final EngineFactory engineFactory;
    final GenerateSettings settings;
    final RequestConverter converter;
    /** Name of the mirrors' keyed state, whose keys a restore iterates. */
    private final String mirrorState;
    /** The task's mailbox, where the engine's start is taken up once it is built. */
    private final transient MailboxExecutor mailbox;

    /** The engine being built, from open() on. */
    private transient EngineStart start;
    /** This subtask's engine; null until the task took it up from {@link #start}, and after close(). */
    transient GenerationEngine engine;
    /** Whether {@link #engine} is taken up; read by the metric {@link GenerationPipeline#ENGINE_STARTED_METRIC}. */
    private transient volatile boolean started;
    /** Every live request of this subtask, in arrival order. */
    transient Map<String, LiveRequest> live;
    transient RequestMirrors mirrors;
    transient GenerateMetrics metrics;
    /** Where the task thread's time goes while the engine has work. */
    private transient TaskTimeMetrics taskTime;
    /** Requests ignored because their id was live. */
    private transient Counter duplicates;
    /** See {@link GenerateSettings#maxWaiting(GenerationEngine)}. */
    private transient int maxWaiting;
    /** Whether a step timer is pending. */
    private transient boolean stepScheduled;
    /** Whether requests were admitted since the last step began. */
    private transient boolean admittedSinceStep;
    /** When the first and the latest request admitted since the last step began arrived (processing time, ms). */
    private transient long burstStart;
    private transient long lastArrival;
    private transient boolean restored;

    EngineOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                   GenerateSettings settings, String mirrorState) {
        super(parameters);
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.converter = settings.converter();
        this.mirrorState = mirrorState;
        this.mailbox = parameters.getMailboxExecutor();
    }

    // ------------------------------------------------------------------------
    //  what differs between the operators
    // ------------------------------------------------------------------------

    /** Takes back, after a restore, the requests keyed state holds; the engine exists by then. */
    abstract void restoreRequests() throws Exception;

    /** Takes a record that arrived; the engine exists by then. */
    abstract void arrived(IN record) throws Exception;

    /**
     * When the step after the one that began at {@code startedAt} is due.
     *
     * @param dueTime when that step was due
     * @param admitted whether requests were admitted before it began
     */
    abstract long nextStepAt(long dueTime, long startedAt, boolean admitted);

    /** Emits what a finished prefill sends on; only a prefill engine finishes one. */
    void handOff(PrefillHandoff handoff) throws Exception {
        throw new IllegalStateException(getClass().getSimpleName() + "'s engine handed off " + handoff.requestId());
    }

    /** Called once the engine has finished a request, with the key set to it. */
    void served() throws Exception {}

    /** Called for every token the engine generated, before it is emitted. */
    void generated(TokenOutput token) {}

    /** Ids of the requests still waiting for a first token that arrived at or before {@code arrivedBy} (ms). */
    List<String> overdue(long arrivedBy) {
        return live.entrySet().stream()
                .filter(e -> !e.getValue().started() && e.getValue().arrivalMillis <= arrivedBy)
                .map(Map.Entry::getKey).toList();
    }

    /** The message of a 429 for the queue timeout. */
    String queueTimeoutMessage() {
        return "no token within the queue timeout of " + settings.queueTimeout()
                + " ('" + GenerateOptions.QUEUE_TIMEOUT.key() + "')";
    }

    // ------------------------------------------------------------------------
    //  life cycle
    // ------------------------------------------------------------------------

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        mirrors = new RequestMirrors(context.getKeyedStateStore(), mirrorState);
        restored = context.isRestored();
    }

    /**
     * Starts building the engine and returns: the task runs meanwhile (see {@link EngineStart}). Once it is built, a
     * mail takes it up on the task thread ({@link #startedEngine}); so does any record or end of input before that.
     */
    @Override
    public void open() throws Exception {
        super.open();
        live = new LinkedHashMap<>();
        metrics = new GenerateMetrics(getMetricGroup());
        MetricGroup mstar = getMetricGroup().addGroup("mstar");
        mstar.gauge(GenerationPipeline.ENGINE_STARTED_METRIC, (Gauge<Integer>) () -> started ? 1 : 0);
        duplicates = mstar.counter("duplicatesIgnored");
        taskTime = new TaskTimeMetrics(mstar);
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        String device = DeviceAssignment.resolve(settings.device(),
                getRuntimeContext().getExternalResourceInfos(settings.gpuResource()), subtask);
        start = EngineStart.begin(getRuntimeContext().getTaskInfo().getTaskNameWithSubtasks() + " engine build",
                () -> engineFactory.create(device, subtask));
        start.whenEnded(() -> mailbox.execute(this::startedEngine, "take up the engine of subtask %d", subtask));
        LOG.info("{} subtask {} builds its engine on {}", getClass().getSimpleName(), subtask, device);
    }

    /**
     * The engine, taken up on the task thread the first time: waits for its build (throwing why it failed), then
     * takes back the requests of a restore and schedules their steps.
     */
    GenerationEngine startedEngine() throws Exception {
        if (engine == null) {
            engine = start.engine();
            maxWaiting = settings.maxWaiting(engine);
            if (restored) {
                restoreRequests();
            }
            started = true;
            scheduleStep();
        }
        return engine;
    }

    @Override
    public final void processElement(StreamRecord<IN> element) throws Exception {
        startedEngine();
        arrived(element.getValue());
    }

    /** End of input (also stop-with-savepoint --drain): runs steps until every request is done. */
    @Override
    public void finish() throws Exception {
        while (startedEngine().hasWork()) {
            step();
        }
        super.finish();
    }

    /** Closes the operator, then the engine, also one still being built (its device memory), also after a failure. */
    @Override
    public void close() throws Exception {
        try (EngineStart closing = start) {
            engine = null;
            started = false;
            super.close();
        }
    }

    // ------------------------------------------------------------------------
    //  arrivals
    // ------------------------------------------------------------------------

    /**
     * Submits a request that arrived, unless its id is live (a duplicate, such as a producer retry: ignored) or
     * {@code completed} remembers it (a 409); a bad one gets a 400. Returns whether the engine took it.
     */
    boolean submitArrived(GenerateRequest request, CompletedRequests completed) throws Exception {
        String id = request.getRequestId();
        if (isDuplicate(id)) {
            return false;
        }
        String conflict = completed.conflict(id);
        if (conflict != null) {
            emitError(id, Responses.CONFLICT, conflict);
            return false;
        }
        return submit(request);
    }

    /** Whether {@code requestId} is live already: then the record is a duplicate (a producer retry), ignored. */
    boolean isDuplicate(String requestId) {
        if (live.containsKey(requestId)) {
            duplicates.inc();
            return true;
        }
        return false;
    }

    /** Runs steps while {@link GenerateOptions#MAX_WAITING} requests wait, which slows the source instead. */
    void stepWhileQueueFull() throws Exception {
        while (engine.waiting() >= maxWaiting) {
            step();
        }
    }

    /** Submits {@code request}, or answers it with a 400; false then. */
    boolean submit(GenerateRequest request) throws Exception {
        try {
            var engineRequest = converter.convert(request);
            stepWhileQueueFull();
            engine.submit(engineRequest);
            return true;
        } catch (RequestValidationException e) {
            emitError(request.getRequestId(), Responses.BAD_REQUEST, e.getMessage());
            return false;
        }
    }

    /** Adds a submitted request to the live set and asks for a step, counting it toward the arrival window. */
    void admit(String requestId, LiveRequest request) {
        taskTime.arrived(live.isEmpty());
        live.put(requestId, request);
        lastArrival = now();
        if (!admittedSinceStep) {
            burstStart = lastArrival;
        }
        admittedSinceStep = true;
        scheduleStep();
    }

    // ------------------------------------------------------------------------
    //  steps
    // ------------------------------------------------------------------------

    /** Asks for a step as soon as possible, if the engine has work and none is pending. */
    void scheduleStep() {
        scheduleStepAt(now());
    }

    /**
     * Steps run as processing-time timers, which the task executes between records and barriers, and which Flink
     * stops firing when the input ends (also on stop-with-savepoint without drain, so in-flight requests stay in
     * the savepoint instead of delaying it until they finish).
     */
    private void scheduleStepAt(long timestamp) {
        if (!stepScheduled && engine.hasWork()) {
            stepScheduled = true;
            getProcessingTimeService().registerTimer(timestamp, this::onStepDue);
        }
    }

    private void onStepDue(long dueTime) throws Exception {
        stepScheduled = false;
        if (burstArriving()) {
            scheduleStepAt(now() + 1);
            return;
        }
        long startedAt = now();
        boolean admitted = admittedSinceStep;
        admittedSinceStep = false;
        step();
        scheduleStepAt(nextStepAt(dueTime, startedAt, admitted));
    }

    /** Whether requests are still arriving in a burst that may hold the next step back: see {@link #BURST_WINDOW_MILLIS}. */
    private boolean burstArriving() {
        long t = now();
        return admittedSinceStep && t - lastArrival <= ARRIVAL_WINDOW_MILLIS && t - burstStart < BURST_WINDOW_MILLIS
                && engine.waiting() < maxWaiting;
    }

    /**
     * Runs one engine step and emits its results: every {@code TokenEvent}, a {@code GenerateResult} per finished
     * request and an {@code ErrorEvent} per failed one.
     */
    void step() throws Exception {
        expireQueued(); // before the step, which could admit them
        taskTime.stepStarted();
        StepResult result = engine.step();
        taskTime.engineStepped();
        for (TokenOutput token : result.tokens()) {
            generated(token);
            LiveRequest request = live.get(token.requestId());
            if (request != null) {
                request.append(token.tokenId());
            }
            emit(Responses.token(token));
        }
        metrics.tokens(result.tokens().size());
        for (PrefillHandoff handoff : result.handoffs()) {
            handOff(handoff);
        }
        for (FinishedRequest done : result.finished()) {
            LiveRequest request = forget(done.requestId());
            served();
            metrics.finished(done.timings());
            emit(Responses.result(done, request == null ? Map.of() : request.request.getMetadata()));
        }
        for (RequestFailure failure : result.failures()) {
            forget(failure.requestId());
            emitError(failure.requestId(), failure.code(), failure.message());
        }
        metrics.engineStats(engine.stats());
        taskTime.stepEnded(result.tokens().size(), engine.hasWork());
    }

    /** Drops the requests {@link #overdue} after the queue timeout, with a 429 each. */
    private void expireQueued() throws Exception {
        long timeoutMillis = settings.queueTimeout().toMillis();
        if (timeoutMillis == 0) {
            return;
        }
        for (String id : overdue(now() - timeoutMillis)) {
            engine.remove(id);
            forget(id);
            emitError(id, Responses.QUEUE_TIMEOUT, queueTimeoutMessage());
        }
    }

    // ------------------------------------------------------------------------
    //  state and output
    // ------------------------------------------------------------------------

    /**
     * Writes to keyed state what changed since the last checkpoint (a new request's mirror, the tokens others
     * generated since), so the checkpoint holds exactly the tokens emitted before its barrier and costs only what
     * is new.
     */
    void saveMirrors(String modelFingerprint) throws Exception {
        taskTime.atBarrier(() -> {
            int written = 0;
            for (Map.Entry<String, LiveRequest> e : live.entrySet()) {
                if (e.getValue().unsaved()) {
                    setCurrentKey(e.getKey());
                    mirrors.save(e.getValue(), modelFingerprint);
                    written++;
                }
            }
            LOG.debug("Saved {} of {} live requests", written, live.size());
        });
    }

    /**
     * Resumes every mirrored request of this subtask's key groups with the tokens it had generated. One whose
     * tokens came from another model than {@code modelFingerprint} is not resumed but ends with a 500: continuing
     * it here would splice two models' outputs.
     */
    void resumeMirroredRequests(String modelFingerprint) throws Exception {
        for (String id : keysOf(mirrorState)) {
            setCurrentKey(id);
            RequestMirror mirror = mirrors.mirror();
            if (mirror == null) {
                continue;
            }
            String generatedBy = mirror.getModelFingerprint();
            if (!generatedBy.isEmpty() && !generatedBy.equals(modelFingerprint)) {
                forget(id);
                emitError(id, Responses.SERVER_ERROR, "not resumed: generation started under model " + generatedBy
                        + " and this job serves model " + modelFingerprint);
                continue;
            }
            LiveRequest request = mirrors.restore(mirror);
            try {
                engine.resume(converter.convert(request.request), request.generated());
            } catch (RequestValidationException e) {
                // The restored job serves a model that cannot take this request (e.g. a smaller context).
                forget(id);
                emitError(id, Responses.BAD_REQUEST, e.getMessage());
                continue;
            }
            live.put(id, request);
        }
        LOG.info("Resumed {} live requests", live.size());
    }

    /** The keys of this subtask's key groups that hold {@code state}, each once. */
    List<String> keysOf(String state) throws Exception {
        KeyedStateBackend<String> backend = getKeyedStateBackend();
        // Collected first: RocksDB's key iterator must not see the state change underneath it.
        try (Stream<String> keys = backend.getKeys(state, VoidNamespace.INSTANCE)) {
            return keys.distinct().toList();
        }
    }

    /** Ends a request: drops it from the live set and clears its keyed mirror; the key stays set to it. */
    LiveRequest forget(String requestId) {
        setCurrentKey(requestId);
        mirrors.clear();
        return live.remove(requestId);
    }

    void emitError(String requestId, int code, String message) {
        metrics.error(code);
        emit(Responses.error(requestId, code, message));
    }

    void emit(Response response) {
        output.collect(new StreamRecord<>(response));
    }

    long now() {
        return getProcessingTimeService().getCurrentProcessingTime();
    }

    @VisibleForTesting
    int liveRequests() {
        return live.size();
    }
}
