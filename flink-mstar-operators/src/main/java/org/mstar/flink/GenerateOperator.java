package org.mstar.flink;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.annotation.Internal;
import org.apache.flink.annotation.VisibleForTesting;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.ExceptionUtils;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
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
 * Serves generation requests on a stream keyed by request id with one {@link GenerationEngine} per subtask. A thin
 * adapter: it turns records into engine submissions, runs the engine's steps in the task's mailbox, turns step
 * results into {@link Response}s, and mirrors every live request in keyed state.
 *
 * <p>Lifecycle, hook by hook:
 * <ul>
 *   <li>{@link #initializeState}: registers the keyed state: the live requests' mirrors ({@link RequestMirrors})
 *       and the ids of served requests ({@link CompletedRequests}).
 *   <li>{@link #open}: builds the engine on this subtask's device (weights, KV memory). After a restore it
 *       resumes every request found in keyed state, so generation continues where the checkpoint left it.
 *   <li>{@link #processElement}: validates the request (a bad one becomes a 400 error event, one whose id was
 *       served within {@link GenerateOptions#REQUEST_ID_RETENTION} a 409) and submits it.
 *       While {@link GenerateOptions#MAX_WAITING} requests wait, it first runs engine steps, which slows the
 *       Kafka source instead of growing memory.
 *   <li>engine steps run as processing-time timers on the task thread, each scheduling the next while the
 *       engine has work, and none while it has none (an arriving request schedules the first); records and
 *       barriers are processed between steps. A step micro-batches every live
 *       request and emits their {@code TokenEvent}s, a {@code GenerateResult} per finished request and an
 *       {@code ErrorEvent} per failed or timed-out one.
 *   <li>{@link #prepareSnapshotPreBarrier}: saves what changed since the last checkpoint (a new request's mirror,
 *       the tokens others generated since), so the checkpoint holds exactly the tokens emitted before its
 *       barrier and costs only what is new.
 *   <li>{@link #finish}: end of input (also stop-with-savepoint --drain): runs steps until every request is
 *       done; nothing is emitted after it. Stop-with-savepoint without drain does not call it: steps stop and
 *       the savepoint holds the live requests, to be resumed by the next job, at any parallelism.
 *   <li>{@link #close}: closes the engine and frees its device memory, also after a failure.
 * </ul>
 *
 * <p>Recovery: a restore resumes each live request with {@link GenerationEngine#resume} and the tokens it had
 * generated at the checkpoint. Each mirror records the {@link ModelFingerprint} it was generated under; a request
 * restored under another model is not resumed but ends with a 500 error event. Sampling is counter-based, so
 * tokens emitted after that checkpoint are generated again, identically. With a transactional sink and read_committed consumers nothing is lost or repeated; with
 * an at-least-once sink a consumer sees the regenerated tokens again and drops them by (request id, index).
 * A request whose id is already live is a duplicate (such as a producer retry) and is ignored; one whose id was
 * served within {@link GenerateOptions#REQUEST_ID_RETENTION} gets a 409 error event.
 */
@Internal
public class GenerateOperator extends AbstractStreamOperator<Response>
        implements OneInputStreamOperator<GenerateRequest, Response> {
    private static final long serialVersionUID = 1L;

    private static final Logger LOG = LoggerFactory.getLogger(GenerateOperator.class);

    static final String MIRROR_STATE = "request-mirror";

    /**
     * How long the next step waits after a step before which requests arrived. Flink runs a due timer before the
     * next input record, so back-to-back steps let about one record in between them, and a burst of N requests
     * would take N steps to admit, each a small prefill beside the running decodes. While requests keep arriving,
     * this gap takes in the rest of the burst; once none arrive, steps run back to back again.
     */
    static final long ARRIVAL_WINDOW_MILLIS = 1;

    // ------------------------------------------------------------------------
    //  configuration
    // ------------------------------------------------------------------------

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;
    private final RequestConverter converter;

    // ------------------------------------------------------------------------
    //  runtime fields
    // ------------------------------------------------------------------------

    /** This subtask's engine; null before open() and after close(). */
    private transient GenerationEngine engine;
    /** Every live request of this subtask, in arrival order. */
    private transient Map<String, LiveRequest> live;
    /** Whether a step timer is pending. */
    private transient boolean stepScheduled;
    /** Whether requests were admitted since the last step began. */
    private transient boolean admittedSinceStep;
    private transient boolean restored;
    /** {@link ModelFingerprint} of this subtask's model, recorded in every mirror. */
    private transient String modelFingerprint;

    // ------------------------------------------------------------------------
    //  keyed state and metrics
    // ------------------------------------------------------------------------

    private transient RequestMirrors mirrors;
    private transient CompletedRequests completed;
    private transient GenerateMetrics metrics;
    /** Requests ignored because their id was live. */
    private transient Counter duplicates;

    GenerateOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                     GenerateSettings settings) {
        super(parameters);
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.converter = settings.converter();
    }

    // ------------------------------------------------------------------------
    //  life cycle
    // ------------------------------------------------------------------------

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        mirrors = new RequestMirrors(context.getKeyedStateStore(), MIRROR_STATE);
        completed = new CompletedRequests(context.getKeyedStateStore(), settings.requestIdRetention());
        restored = context.isRestored();
    }

    @Override
    public void open() throws Exception {
        super.open();
        live = new LinkedHashMap<>();
        metrics = new GenerateMetrics(getMetricGroup());
        duplicates = getMetricGroup().addGroup("mstar").counter("duplicatesIgnored");
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        String device = DeviceAssignment.resolve(settings.device(),
                getRuntimeContext().getExternalResourceInfos(settings.gpuResource()), subtask);
        modelFingerprint = ModelFingerprint.of(engineFactory, settings);
        engine = engineFactory.create(device, subtask);
        LOG.info("Subtask {} serves model {} on {}", subtask, modelFingerprint, device);
        if (restored) {
            resumeLiveRequests();
        }
        scheduleStep();
    }

    @Override
    public void processElement(StreamRecord<GenerateRequest> element) throws Exception {
        GenerateRequest request = element.getValue();
        String id = request.getRequestId();
        if (live.containsKey(id)) {
            duplicates.inc();
            return;
        }
        String conflict = completed.conflict(id);
        if (conflict != null) {
            emitError(id, Responses.CONFLICT, conflict);
            return;
        }
        GenerationRequest engineRequest;
        try {
            engineRequest = converter.convert(request);
        } catch (RequestValidationException e) {
            emitError(id, Responses.BAD_REQUEST, e.getMessage());
            return;
        }
        while (engine.waiting() >= settings.maxWaiting()) {
            step();
        }
        try {
            engine.submit(engineRequest);
        } catch (RequestValidationException e) {
            emitError(id, Responses.BAD_REQUEST, e.getMessage());
            return;
        }
        live.put(id, LiveRequest.arrived(request, now()));
        admittedSinceStep = true;
        scheduleStep();
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        super.prepareSnapshotPreBarrier(checkpointId);
        int written = 0;
        for (Map.Entry<String, LiveRequest> e : live.entrySet()) {
            if (e.getValue().unsaved()) {
                setCurrentKey(e.getKey());
                mirrors.save(e.getValue(), modelFingerprint);
                written++;
            }
        }
        LOG.debug("Checkpoint {}: saved {} of {} live requests", checkpointId, written, live.size());
    }

    @Override
    public void finish() throws Exception {
        while (engine.hasWork()) {
            step();
        }
        super.finish();
    }

    @Override
    public void close() throws Exception {
        Exception failure = null;
        if (engine != null) {
            try {
                engine.close();
            } catch (Exception e) {
                failure = e;
            }
            engine = null;
        }
        try {
            super.close();
        } catch (Exception e) {
            failure = ExceptionUtils.firstOrSuppressed(e, failure);
        }
        if (failure != null) {
            throw failure;
        }
    }

    // ------------------------------------------------------------------------
    //  steps
    // ------------------------------------------------------------------------

    /** Asks for a step as soon as possible, if the engine has work and none is pending. */
    private void scheduleStep() {
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

    /**
     * Runs one step and schedules the next 1 ms after this one was due: back to back whenever a step takes longer
     * than that (Flink fires a timer whose time has passed at once), at most 1000 steps a second otherwise. After a
     * step before which requests arrived, the next waits {@link #ARRIVAL_WINDOW_MILLIS} from now instead, so the
     * rest of a burst is admitted together.
     */
    private void onStepDue(long dueTime) throws Exception {
        stepScheduled = false;
        boolean arriving = admittedSinceStep;
        admittedSinceStep = false;
        step();
        scheduleStepAt(arriving ? now() + ARRIVAL_WINDOW_MILLIS : dueTime + 1);
    }

    private void step() throws Exception {
        expireQueued(); // before the step, which could admit them
        StepResult result = engine.step();
        for (TokenOutput token : result.tokens()) {
            LiveRequest request = live.get(token.requestId());
            if (request != null) {
                request.append(token.tokenId());
            }
            emit(Responses.token(token));
        }
        metrics.tokens(result.tokens().size());
        for (FinishedRequest done : result.finished()) {
            LiveRequest request = forget(done.requestId());
            completed.record(now());
            metrics.finished(done.timings());
            emit(Responses.result(done, request == null ? Map.of() : request.request.getMetadata()));
        }
        for (RequestFailure failure : result.failures()) {
            forget(failure.requestId());
            emitError(failure.requestId(), failure.code(), failure.message());
        }
        metrics.engineStats(engine.stats());
    }

    /** Drops requests that produced no token within the queue timeout, with a 429 each. */
    private void expireQueued() throws Exception {
        long timeoutMillis = settings.queueTimeout().toMillis();
        if (timeoutMillis == 0) {
            return;
        }
        long now = now();
        List<String> expired = new ArrayList<>();
        for (Iterator<Map.Entry<String, LiveRequest>> it = live.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, LiveRequest> e = it.next();
            if (!e.getValue().started() && now - e.getValue().arrivalMillis >= timeoutMillis) {
                expired.add(e.getKey());
            }
        }
        for (String id : expired) {
            engine.remove(id);
            forget(id);
            emitError(id, Responses.QUEUE_TIMEOUT, "no token within the queue timeout of " + settings.queueTimeout()
                    + " ('" + GenerateOptions.QUEUE_TIMEOUT.key() + "')");
        }
    }

    // ------------------------------------------------------------------------
    //  state and output
    // ------------------------------------------------------------------------

    /** Re-admits every request of this subtask's key groups that was live at the restored checkpoint. */
    private void resumeLiveRequests() throws Exception {
        List<String> ids;
        KeyedStateBackend<String> backend = getKeyedStateBackend();
        // Collected first: RocksDB's key iterator must not see the state change underneath it.
        try (Stream<String> keys = backend.getKeys(MIRROR_STATE, VoidNamespace.INSTANCE)) {
            ids = keys.toList();
        }
        for (String id : ids) {
            setCurrentKey(id);
            RequestMirror mirror = mirrors.mirror();
            if (mirror == null) {
                continue;
            }
            String generatedBy = mirror.getModelFingerprint();
            if (!generatedBy.isEmpty() && !generatedBy.equals(modelFingerprint)) {
                // Its tokens came from other weights: continuing them here would splice two models' outputs.
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

    /** Ends a request: drops it from the live set and clears its keyed mirror; the key stays set to it. */
    private LiveRequest forget(String requestId) {
        setCurrentKey(requestId);
        mirrors.clear();
        return live.remove(requestId);
    }

    private void emitError(String requestId, int code, String message) {
        metrics.error(code);
        emit(Responses.error(requestId, code, message));
    }

    private void emit(Response response) {
        output.collect(new StreamRecord<>(response));
    }

    private long now() {
        return getProcessingTimeService().getCurrentProcessingTime();
    }

    @VisibleForTesting
    int liveRequests() {
        return live.size();
    }
}
