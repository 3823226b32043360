package org.mstar.flink;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.metrics.Counter;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.OutputTag;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.PrefillHandoff;
import org.mstar.engine.RequestFailure;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.RequestMirror;
import org.mstar.schemas.Response;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The prefill half of disaggregated serving, keyed by request id, over a {@code PREFILL} engine: it runs each
 * request's prompt, emits its first {@code TokenEvent} and sends the finished prefill to the {@link DecodeOperator}
 * as {@link KvHandoff} records on {@link #HANDOFFS}. A request that ends with its first token (max_tokens 1, a stop
 * token) gets its {@code GenerateResult} here and no hand-off.
 *
 * <p>State: a {@link RequestMirror} per request between arrival and hand-off, written on arrival and cleared in the
 * step that hands it off, so a checkpoint holds exactly the requests whose hand-off was not sent before its barrier;
 * a restore prefills those again (deterministically, so the first token and the KV are the same) and sends their
 * hand-offs then. A step sends all records of a hand-off at once, so a barrier never falls between them. The ids of
 * requests handed off or finished here are remembered ({@link CompletedRequests}): a later request under one gets a
 * 409.
 */
@Internal
public class PrefillOperator extends AbstractStreamOperator<Response>
        implements OneInputStreamOperator<GenerateRequest, Response> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(PrefillOperator.class);

    /** The hand-off records, keyed downstream by request id. */
    public static final OutputTag<KvHandoff> HANDOFFS = new OutputTag<>("mstar-handoffs",
            new AvroTypeInfo<>(KvHandoff.class));

    static final String MIRROR_STATE = "prefill-mirror";

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;
    private final RequestConverter converter;
    private final int maxRecordBytes;

    private transient GenerationEngine engine;
    /** Requests not yet handed off, in arrival order. */
    private transient Map<String, Pending> live;
    private transient boolean stepScheduled;
    /** Whether requests were admitted since the last step began. */
    private transient boolean admittedSinceStep;
    private transient boolean restored;
    private transient ValueState<RequestMirror> mirrors;
    private transient CompletedRequests completed;
    private transient GenerateMetrics metrics;
    private transient HandoffMetrics handoffMetrics;
    private transient Counter duplicates;

    PrefillOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                    GenerateSettings settings, int maxRecordBytes) {
        super(parameters);
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.converter = settings.converter();
        this.maxRecordBytes = maxRecordBytes;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        mirrors = context.getKeyedStateStore().getState(
                new ValueStateDescriptor<>(MIRROR_STATE, new AvroTypeInfo<>(RequestMirror.class)));
        completed = new CompletedRequests(context.getKeyedStateStore(), settings.requestIdRetention());
        restored = context.isRestored();
    }

    @Override
    public void open() throws Exception {
        super.open();
        live = new LinkedHashMap<>();
        metrics = new GenerateMetrics(getMetricGroup());
        handoffMetrics = new HandoffMetrics(getMetricGroup());
        duplicates = getMetricGroup().addGroup("mstar").counter("duplicatesIgnored");
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        String device = DeviceAssignment.resolve(settings.device(),
                getRuntimeContext().getExternalResourceInfos(settings.gpuResource()), subtask);
        engine = engineFactory.create(device, subtask);
        LOG.info("Prefill subtask {} serves on {}", subtask, device);
        if (restored) {
            resubmitLiveRequests();
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
        if (!submit(request)) {
            return;
        }
        setCurrentKey(id); // steps run while submitting may have moved it
        long arrival = now();
        // nothing generated yet: a restore under another model simply prefills again
        mirrors.update(new RequestMirror(request, List.of(), arrival, ""));
        live.put(id, new Pending(request, arrival));
        admittedSinceStep = true;
        scheduleStep();
    }

    /** Submits {@code request}, or answers it with a 400; false then. */
    private boolean submit(GenerateRequest request) throws Exception {
        try {
            var engineRequest = converter.convert(request);
            while (engine.waiting() >= settings.maxWaiting()) {
                step();
            }
            engine.submit(engineRequest);
            return true;
        } catch (RequestValidationException e) {
            emitError(request.getRequestId(), Responses.BAD_REQUEST, e.getMessage());
            return false;
        }
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
        try {
            if (engine != null) {
                engine.close();
                engine = null;
            }
        } finally {
            super.close();
        }
    }

    private void scheduleStep() {
        scheduleStepAt(now());
    }

    private void scheduleStepAt(long timestamp) {
        if (!stepScheduled && engine.hasWork()) {
            stepScheduled = true;
            getProcessingTimeService().registerTimer(timestamp, this::onStepDue);
        }
    }

    /** As the colocated operator: after a step before which requests arrived, the rest of a burst comes in first. */
    private void onStepDue(long dueTime) throws Exception {
        stepScheduled = false;
        boolean arriving = admittedSinceStep;
        admittedSinceStep = false;
        step();
        scheduleStepAt(arriving ? now() + GenerateOperator.ARRIVAL_WINDOW_MILLIS : now());
    }

    private void step() throws Exception {
        expireQueued(); // before the step, which could admit them
        StepResult result = engine.step();
        for (TokenOutput token : result.tokens()) {
            output.collect(new StreamRecord<>(Responses.token(token)));
        }
        metrics.tokens(result.tokens().size());
        for (PrefillHandoff h : result.handoffs()) {
            Pending pending = forget(h.requestId());
            completed.record(now());
            GenerateRequest request = pending.request();
            metrics.firstToken(Math.max(0, now() - pending.arrivalMillis()) * 1000);
            long bytes = 0;
            for (KvHandoff record : HandoffRecords.split(h, request, maxRecordBytes, System.currentTimeMillis())) {
                int n = HandoffRecords.dataBytes(record);
                bytes += n;
                handoffMetrics.record(n);
                output.collect(HANDOFFS, new StreamRecord<>(record));
            }
            handoffMetrics.handoff(bytes, -1);
        }
        for (FinishedRequest done : result.finished()) {
            Pending pending = forget(done.requestId());
            completed.record(now());
            metrics.finished(done.timings());
            output.collect(new StreamRecord<>(Responses.result(done,
                    pending == null ? Map.of() : pending.request().getMetadata())));
        }
        for (RequestFailure failure : result.failures()) {
            forget(failure.requestId());
            emitError(failure.requestId(), failure.code(), failure.message());
        }
        metrics.engineStats(engine.stats());
    }

    /**
     * As the colocated operator: drops requests that produced no token within the queue timeout, with a 429 each.
     * Here that is every request not yet handed off, since the first token and the hand-off come in one step.
     */
    private void expireQueued() throws Exception {
        long timeoutMillis = settings.queueTimeout().toMillis();
        if (timeoutMillis == 0) {
            return;
        }
        long now = now();
        List<String> expired = live.entrySet().stream()
                .filter(e -> now - e.getValue().arrivalMillis() >= timeoutMillis).map(Map.Entry::getKey).toList();
        for (String id : expired) {
            engine.remove(id);
            forget(id);
            emitError(id, Responses.QUEUE_TIMEOUT, "no token within the queue timeout of " + settings.queueTimeout()
                    + " ('" + GenerateOptions.QUEUE_TIMEOUT.key() + "')");
        }
    }

    private void resubmitLiveRequests() throws Exception {
        List<String> ids;
        KeyedStateBackend<String> backend = getKeyedStateBackend();
        try (Stream<String> keys = backend.getKeys(MIRROR_STATE, VoidNamespace.INSTANCE)) {
            ids = keys.toList();
        }
        for (String id : ids) {
            setCurrentKey(id);
            RequestMirror mirror = mirrors.value();
            if (mirror == null) {
                continue;
            }
            if (submit(mirror.getRequest())) {
                live.put(id, new Pending(mirror.getRequest(), mirror.getArrivalTimeMs()));
            } else {
                mirrors.clear();
            }
        }
        LOG.info("Prefilling {} restored requests again", live.size());
    }

    /** A request between arrival and hand-off; arrival in processing time (epoch ms), kept across restores. */
    private record Pending(GenerateRequest request, long arrivalMillis) {}

    private Pending forget(String requestId) {
        setCurrentKey(requestId);
        mirrors.clear();
        return live.remove(requestId);
    }

    private void emitError(String requestId, int code, String message) {
        metrics.error(code);
        output.collect(new StreamRecord<>(Responses.error(requestId, code, message)));
    }

    private long now() {
        return getProcessingTimeService().getCurrentProcessingTime();
    }
}
