package org.mstar.flink;

import java.util.List;
import org.apache.flink.annotation.Internal;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.OutputTag;
import org.mstar.engine.PrefillHandoff;
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
 *
 * <p>The queue timeout runs from arrival to hand-off, since the first token and the hand-off come in one step.
 */
@Internal
public class PrefillOperator extends EngineOperator<GenerateRequest> {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(PrefillOperator.class);

    /** The hand-off records, keyed downstream by request id. */
    public static final OutputTag<KvHandoff> HANDOFFS = new OutputTag<>("mstar-handoffs",
            new AvroTypeInfo<>(KvHandoff.class));

    static final String MIRROR_STATE = "prefill-mirror";

    private final int maxRecordBytes;

    private transient CompletedRequests completed;
    private transient HandoffMetrics handoffMetrics;

    PrefillOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                    GenerateSettings settings, int maxRecordBytes) {
        super(parameters, engineFactory, settings, MIRROR_STATE);
        this.maxRecordBytes = maxRecordBytes;
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        completed = new CompletedRequests(context.getKeyedStateStore(), settings.requestIdRetention());
    }

    @Override
    public void open() throws Exception {
        handoffMetrics = new HandoffMetrics(getMetricGroup()); // before the engine starts: its restore may hand off
        super.open();
    }

    @Override
    void arrived(GenerateRequest request) throws Exception {
        if (!submitArrived(request, completed)) {
            return;
        }
        String id = request.getRequestId();
        setCurrentKey(id); // steps run while submitting may have moved it
        LiveRequest pending = LiveRequest.arrived(request, now());
        // nothing generated yet: a restore under another model simply prefills again
        mirrors.start(new RequestMirror(request, List.of(), pending.arrivalMillis, ""));
        admit(id, pending);
    }

    /** Submits every request whose hand-off the restored checkpoint did not hold as sent, to prefill it again. */
    @Override
    void restoreRequests() throws Exception {
        for (String id : keysOf(MIRROR_STATE)) {
            setCurrentKey(id);
            RequestMirror mirror = mirrors.mirror();
            if (mirror == null) {
                continue;
            }
            if (submit(mirror.getRequest())) {
                live.put(id, LiveRequest.arrived(mirror.getRequest(), mirror.getArrivalTimeMs()));
            } else {
                setCurrentKey(id); // steps run inside submit may have moved the key
                mirrors.clear();
            }
        }
        LOG.info("Prefilling {} restored requests again", live.size());
    }

    /** As the colocated operator: after a step before which requests arrived, the rest of a burst comes in first. */
    @Override
    long nextStepAt(long dueTime, long startedAt, boolean admitted) {
        return admitted ? now() + ARRIVAL_WINDOW_MILLIS : now();
    }

    /** Sends all records of the hand-off at once, so that no checkpoint barrier falls between them. */
    @Override
    void handOff(PrefillHandoff h) throws Exception {
        LiveRequest pending = forget(h.requestId());
        completed.record(now());
        metrics.firstToken(Math.max(0, now() - pending.arrivalMillis) * 1000);
        long bytes = 0;
        for (KvHandoff record : HandoffRecords.split(h, pending.request, maxRecordBytes, System.currentTimeMillis())) {
            int n = HandoffRecords.dataBytes(record);
            bytes += n;
            handoffMetrics.record(n);
            output.collect(HANDOFFS, new StreamRecord<>(record));
        }
        handoffMetrics.handoff(bytes, -1);
    }

    @Override
    void served() throws Exception {
        completed.record(now());
    }
}
