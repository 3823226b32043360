package org.mstar.flink;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.engine.PrefillHandoff;
import org.mstar.engine.TokenOutput;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.KvHandoffHeader;
import org.mstar.schemas.RequestMirror;
import org.mstar.schemas.Response;

/**
 * The decode half of disaggregated serving, keyed by request id, over a {@code DECODE} engine: it collects each
 * request's {@link KvHandoff} records, hands the complete hand-off to the engine (which imports the KV its prefix
 * cache lacks) and emits the request's tokens from index 1 on and its {@code GenerateResult}.
 *
 * <p>State, per request: the parts received so far, until the last one arrives; then, in the same call, a
 * {@link RequestMirror} (the request and its generated tokens, the prefill's first included) is written, and the
 * tokens generated after it are appended before every checkpoint barrier ({@link RequestMirrors}), as the
 * colocated operator does. The parts are held on the heap and go into keyed state only when a barrier finds a
 * hand-off incomplete: never with aligned checkpoints (a prefill step emits all records of a hand-off together,
 * so the barrier on their channel comes before or after all of them), only with unaligned ones. A checkpoint thus
 * holds each request either as parts or as a mirror, never both, so a hand-off is applied once; a restore resumes
 * mirrored requests by recomputing their KV from prompt + generated tokens, and keeps waiting for the parts of the
 * others, which the prefill side re-sends when it did not send them before the same checkpoint.
 */
@Internal
public class DecodeOperator extends EngineOperator<KvHandoff> {
    private static final long serialVersionUID = 1L;

    static final String MIRROR_STATE = "request-mirror";
    static final String PARTS_STATE = "handoff-parts";

    /** {@link ModelFingerprint} of this subtask's model, recorded in every mirror. */
    private transient String modelFingerprint;
    /** The parts of each hand-off received so far, by request and part index. */
    private transient Map<String, Map<Integer, KvHandoff>> receiving;
    /** Requests whose parts a checkpoint wrote to {@link #parts} (or a restore read from there). */
    private transient Set<String> partsInState;
    /** Received requests without a token from this side yet, by arrival here (ms), for the queue timeout. */
    private transient Map<String, Long> awaitingStep;
    /** Parts of the hand-offs a checkpoint found incomplete. */
    private transient MapState<Integer, KvHandoff> parts;
    private transient HandoffMetrics handoffMetrics;

    DecodeOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                   GenerateSettings settings) {
        super(parameters, engineFactory, settings, MIRROR_STATE);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        parts = context.getKeyedStateStore().getMapState(
                new MapStateDescriptor<>(PARTS_STATE, Types.INT, new AvroTypeInfo<>(KvHandoff.class)));
    }

    @Override
    public void open() throws Exception {
        receiving = new HashMap<>();
        partsInState = new HashSet<>();
        awaitingStep = new HashMap<>();
        handoffMetrics = new HandoffMetrics(getMetricGroup());
        modelFingerprint = ModelFingerprint.of(engineFactory, settings);
        super.open();
    }

    @Override
    void restoreRequests() throws Exception {
        resumeMirroredRequests(modelFingerprint);
        restoreIncompleteHandoffs();
    }

    @Override
    void arrived(KvHandoff record) throws Exception {
        String id = record.getRequestId();
        if (isDuplicate(id)) {
            return;
        }
        handoffMetrics.record(HandoffRecords.dataBytes(record));
        Map<Integer, KvHandoff> received = receiving.computeIfAbsent(id, k -> new HashMap<>());
        received.put(record.getPart(), record);
        if (received.size() < record.getParts()) {
            return;
        }
        receiving.remove(id);
        if (partsInState.remove(id)) {
            parts.clear();
        }
        KvHandoffHeader header = received.get(0).getHeader();
        GenerateRequest request = header.getRequest();
        PrefillHandoff handoff;
        try {
            handoff = HandoffRecords.assemble(received);
        } catch (IllegalArgumentException e) {
            emitError(id, Responses.SERVER_ERROR, "broken prefill hand-off: " + e.getMessage());
            return;
        }
        stepWhileQueueFull();
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
        writeIncompleteHandoffs();
        saveMirrors(modelFingerprint);
    }

    /**
     * While a hand-off is partly received, the next step waits as long as this one took: Flink runs a due timer
     * before the next input record, so back-to-back steps would take in one record per step, and a hand-off of a
     * long prompt (hundreds of records) would take hundreds of steps to arrive. This way records and steps share
     * the task's time about evenly until the hand-off is complete.
     */
    @Override
    long nextStepAt(long dueTime, long startedAt, boolean admitted) {
        return receiving.isEmpty() ? now() : now() + Math.max(1, now() - startedAt);
    }

    @Override
    void generated(TokenOutput token) {
        awaitingStep.remove(token.requestId());
    }

    /**
     * The colocated operator's queue timeout, counted from a hand-off's arrival here: a received request that got
     * no token from this side within it is dropped with a 429 (after its token 0, which the prefill side sent). It
     * bounds how long a decode side without room holds hand-offs, whose KV waits in its memory meanwhile. Resumed
     * requests had their tokens and are never dropped, as in the colocated operator.
     */
    @Override
    List<String> overdue(long arrivedBy) {
        return awaitingStep.entrySet().stream()
                .filter(e -> e.getValue() <= arrivedBy).map(Map.Entry::getKey).toList();
    }

    @Override
    String queueTimeoutMessage() {
        return super.queueTimeoutMessage() + " after the hand-off arrived";
    }

    @Override
    LiveRequest forget(String requestId) {
        awaitingStep.remove(requestId);
        return super.forget(requestId);
    }

    /** Puts the parts of hand-offs still incomplete into keyed state (only an unaligned checkpoint finds any). */
    private void writeIncompleteHandoffs() throws Exception {
        for (Map.Entry<String, Map<Integer, KvHandoff>> e : receiving.entrySet()) {
            setCurrentKey(e.getKey());
            parts.putAll(e.getValue());
            partsInState.add(e.getKey());
        }
    }

    /** Takes back the parts of the hand-offs the restored checkpoint found incomplete. */
    private void restoreIncompleteHandoffs() throws Exception {
        for (String id : keysOf(PARTS_STATE)) {
            setCurrentKey(id);
            Map<Integer, KvHandoff> received = new HashMap<>();
            for (Map.Entry<Integer, KvHandoff> e : parts.entries()) {
                received.put(e.getKey(), e.getValue());
            }
            if (!received.isEmpty()) {
                receiving.put(id, received);
                partsInState.add(id);
            }
        }
    }
}
