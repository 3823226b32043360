package org.mstar.flink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.metrics.Counter;
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
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.KvHandoffHeader;
import org.mstar.schemas.RequestMirror;
import org.mstar.schemas.Response;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The decode half of disaggregated serving, keyed by request id, over a {@code DECODE} engine: it collects each
 * request's {@link KvHandoff} records in keyed state, hands the complete hand-off to the engine (which imports the
 * KV its prefix cache lacks) and emits the request's tokens from index 1 on and its {@code GenerateResult}.
 *
 * <p>State, per request: the parts received so far, until the last one arrives; then, in the same call, the parts
 * are cleared and a {@link RequestMirror} (the request and its generated tokens, the prefill's first included) is
 * written, and the tokens generated after it are appended before every checkpoint barrier ({@link RequestMirrors}),
 * as the colocated operator does. A checkpoint thus
 * holds each request either as parts or as a mirror, never both, so a hand-off is applied once; a restore resumes
 * mirrored requests by recomputing their KV from prompt + generated tokens, and keeps waiting for the parts of the
 * others, which the prefill side re-sends when it did not send them before the same checkpoint.
 */
@Internal
public class DecodeOperator extends AbstractStreamOperator<Response>
        implements OneInputStreamOperator<KvHandoff, Response> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(DecodeOperator.class);

    static final String MIRROR_STATE = "request-mirror";
    static final String PARTS_STATE = "handoff-parts";
    static final String PARTS_COUNT_STATE = "handoff-parts-received";

    private final EngineFactory engineFactory;
    private final GenerateSettings settings;
    /** {@link ModelFingerprint} of this subtask's model, recorded in every mirror. */
    private transient String modelFingerprint;
    private final RequestConverter converter;

    private transient GenerationEngine engine;
    private transient Map<String, LiveRequest> live;
    private transient boolean stepScheduled;
    /** Requests whose hand-off is partly received: a scheduling hint, not state. */
    private transient Set<String> receiving;
    /** Received requests without a token from this side yet, by arrival here (ms), for the queue timeout. */
    private transient Map<String, Long> awaitingStep;
    private transient boolean restored;
    private transient RequestMirrors mirrors;
    private transient MapState<Integer, KvHandoff> parts;
    /** How many distinct parts {@link #parts} holds. */
    private transient ValueState<Integer> partsReceived;
    private transient GenerateMetrics metrics;
    private transient HandoffMetrics handoffMetrics;
    private transient Counter duplicates;

    DecodeOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                   GenerateSettings settings) {
        super(parameters);
        this.engineFactory = engineFactory;
        this.settings = settings;
        this.converter = settings.converter();
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        mirrors = new RequestMirrors(context.getKeyedStateStore(), MIRROR_STATE);
        parts = context.getKeyedStateStore().getMapState(
                new MapStateDescriptor<>(PARTS_STATE, Types.INT, new AvroTypeInfo<>(KvHandoff.class)));
        partsReceived = context.getKeyedStateStore().getState(new ValueStateDescriptor<>(PARTS_COUNT_STATE, Types.INT));
        restored = context.isRestored();
    }

    @Override
    public void open() throws Exception {
        super.open();
        live = new LinkedHashMap<>();
        receiving = new HashSet<>();
        awaitingStep = new HashMap<>();
        metrics = new GenerateMetrics(getMetricGroup());
        handoffMetrics = new HandoffMetrics(getMetricGroup());
        duplicates = getMetricGroup().addGroup("mstar").counter("duplicatesIgnored");
        int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        String device = DeviceAssignment.resolve(settings.device(),
                getRuntimeContext().getExternalResourceInfos(settings.gpuResource()), subtask);
        modelFingerprint = ModelFingerprint.of(engineFactory, settings);
        engine = engineFactory.create(device, subtask);
        LOG.info("Decode subtask {} serves on {}", subtask, device);
        if (restored) {
            resumeLiveRequests();
        }
        scheduleStep();
    }

    @Override
    public void processElement(StreamRecord<KvHandoff> element) throws Exception {
        KvHandoff record = element.getValue();
        String id = record.getRequestId();
        if (live.containsKey(id)) {
            duplicates.inc();
            return;
        }
        handoffMetrics.record(HandoffRecords.dataBytes(record));
        // counted, not listed: reading every part held at each arrival would cost quadratic time in the parts
        int count = partsReceived.value() == null ? 0 : partsReceived.value();
        if (!parts.contains(record.getPart())) {
            count++;
        }
        parts.put(record.getPart(), record);
        if (count < record.getParts()) {
            partsReceived.update(count);
            receiving.add(id);
            return;
        }
        receiving.remove(id);
        Map<Integer, KvHandoff> received = new HashMap<>();
        for (Map.Entry<Integer, KvHandoff> e : parts.entries()) {
            received.put(e.getKey(), e.getValue());
        }
        parts.clear();
        partsReceived.clear();
        KvHandoffHeader header = received.get(0).getHeader();
        GenerateRequest request = header.getRequest();
        PrefillHandoff handoff;
        try {
            handoff = HandoffRecords.assemble(received);
        } catch (IllegalArgumentException e) {
            emitError(id, Responses.SERVER_ERROR, "broken prefill hand-off: " + e.getMessage());
            return;
        }
        while (engine.waiting() >= settings.maxWaiting()) {
            step();
        }
        try {
            engine.receive(converter.convert(request), handoff);
        } catch (RequestValidationException e) {
            // the prefill side accepted it: this decode side serves a model that cannot
            emitError(id, Responses.BAD_REQUEST, e.getMessage());
            return;
        } catch (IllegalArgumentException e) {
            emitError(id, Responses.SERVER_ERROR, "broken prefill hand-off: " + e.getMessage());
            return;
        }
        long bytes = received.values().stream().mapToLong(HandoffRecords::dataBytes).sum();
        handoffMetrics.handoff(bytes, Math.max(0, System.currentTimeMillis() - header.getPublishedAtMs()));
        RequestMirror mirror = new RequestMirror(request, header.getGeneratedTokenIds(), now(), modelFingerprint);
        setCurrentKey(id); // steps run above may have moved it
        mirrors.start(mirror);
        live.put(id, LiveRequest.restored(mirror, List.of()));
        awaitingStep.put(id, now());
        scheduleStep();
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        super.prepareSnapshotPreBarrier(checkpointId);
        for (Map.Entry<String, LiveRequest> e : live.entrySet()) {
            if (e.getValue().unsaved()) {
                setCurrentKey(e.getKey());
                mirrors.save(e.getValue(), modelFingerprint);
            }
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

    /**
     * Runs one step. While a hand-off is partly received, the next step waits as long as this one took: Flink runs a
     * due timer before the next input record, so back-to-back steps would take in one record per step, and a
     * hand-off of a long prompt (hundreds of records) would take hundreds of steps to arrive. This way records and
     * steps share the task's time about evenly until the hand-off is complete.
     */
    private void onStepDue(long dueTime) throws Exception {
        stepScheduled = false;
        long start = now();
        step();
        scheduleStepAt(receiving.isEmpty() ? now() : now() + Math.max(1, now() - start));
    }

    private void step() throws Exception {
        expireQueued(); // before the step, which could admit them
        StepResult result = engine.step();
        for (TokenOutput token : result.tokens()) {
            awaitingStep.remove(token.requestId());
            LiveRequest request = live.get(token.requestId());
            if (request != null) {
                request.append(token.tokenId());
            }
            output.collect(new StreamRecord<>(Responses.token(token)));
        }
        metrics.tokens(result.tokens().size());
        for (FinishedRequest done : result.finished()) {
            LiveRequest request = forget(done.requestId());
            metrics.finished(done.timings());
            output.collect(new StreamRecord<>(Responses.result(done,
                    request == null ? Map.of() : request.request.getMetadata())));
        }
        for (RequestFailure failure : result.failures()) {
            forget(failure.requestId());
            emitError(failure.requestId(), failure.code(), failure.message());
        }
        metrics.engineStats(engine.stats());
    }

    /** Re-admits mirrored requests, recomputing their KV from prompt + generated tokens. */
    private void resumeLiveRequests() throws Exception {
        List<String> ids;
        KeyedStateBackend<String> backend = getKeyedStateBackend();
        try (Stream<String> keys = backend.getKeys(MIRROR_STATE, VoidNamespace.INSTANCE)) {
            ids = keys.toList();
        }
        List<String> resumed = new ArrayList<>();
        for (String id : ids) {
            setCurrentKey(id);
            RequestMirror mirror = mirrors.mirror();
            if (mirror == null) {
                continue;
            }
            String generatedBy = mirror.getModelFingerprint();
            if (!generatedBy.isEmpty() && !generatedBy.equals(modelFingerprint)) {
                forget(id); // its tokens came from other weights
                emitError(id, Responses.SERVER_ERROR, "not resumed: generation started under model " + generatedBy
                        + " and this job serves model " + modelFingerprint);
                continue;
            }
            LiveRequest request = mirrors.restore(mirror);
            try {
                engine.resume(converter.convert(request.request), request.generated());
            } catch (RequestValidationException e) {
                forget(id);
                emitError(id, Responses.BAD_REQUEST, e.getMessage());
                continue;
            }
            live.put(id, request);
            resumed.add(id);
        }
        LOG.info("Resumed {} live requests", resumed.size());
    }

    /**
     * The colocated operator's queue timeout, counted from a hand-off's arrival here: a received request that got
     * no token from this side within it is dropped with a 429 (after its token 0, which the prefill side sent). It
     * bounds how long a decode side without room holds hand-offs, whose KV waits in its memory meanwhile. Resumed
     * requests had their tokens and are never dropped, as in the colocated operator.
     */
    private void expireQueued() throws Exception {
        long timeoutMillis = settings.queueTimeout().toMillis();
        if (timeoutMillis == 0) {
            return;
        }
        long now = now();
        List<String> expired = awaitingStep.entrySet().stream()
                .filter(e -> now - e.getValue() >= timeoutMillis).map(Map.Entry::getKey).toList();
        for (String id : expired) {
            engine.remove(id);
            forget(id);
            emitError(id, Responses.QUEUE_TIMEOUT, "no token within the queue timeout of " + settings.queueTimeout()
                    + " ('" + GenerateOptions.QUEUE_TIMEOUT.key() + "') after the hand-off arrived");
        }
    }

    private LiveRequest forget(String requestId) {
        awaitingStep.remove(requestId);
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

    @org.apache.flink.annotation.VisibleForTesting
    int liveRequests() {
        return live.size();
    }
}
