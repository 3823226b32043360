package org.mstar.flink;

import org.apache.flink.annotation.Internal;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.streaming.api.operators.StreamOperatorParameters;
import org.mstar.engine.GenerationEngine;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.Response;

/**
 * Serves generation requests on a stream keyed by request id with one {@link GenerationEngine} per subtask. A thin
 * adapter: it turns records into engine submissions, runs the engine's steps in the task's mailbox, turns step
 * results into {@link Response}s, and mirrors every live request in keyed state.
 *
 * <p>Lifecycle, hook by hook:
 * <ul>
 *   <li>{@link #initializeState}: registers the keyed state: the live requests' mirrors ({@link RequestMirrors})
 *       and the ids of served requests ({@link CompletedRequests}).
 *   <li>{@link #open}: starts building the engine on this subtask's device (weights, KV memory) on a thread of
 *       its own, so the task runs meanwhile ({@link EngineStart}). The task takes the engine up once it is built
 *       (or at the first record, waiting for it); after a restore it then resumes every request found in keyed
 *       state, so generation continues where the checkpoint left it.
 *   <li>{@link #arrived}: validates the request (a bad one becomes a 400 error event, one whose id was
 *       served within {@link GenerateOptions#REQUEST_ID_RETENTION} a 409) and submits it.
 *       While {@link GenerateOptions#MAX_WAITING} requests wait, it first runs engine steps, which slows the
 *       Kafka source instead of growing memory.
 *   <li>engine steps run as processing-time timers on the task thread ({@link EngineOperator}), each scheduling
 *       the next while the engine has work, and none while it has none (an arriving request schedules the first);
 *       records and barriers are processed between steps. A step micro-batches every live
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
public class GenerateOperator extends EngineOperator<GenerateRequest> {
    private static final long serialVersionUID = 1L;

    static final String MIRROR_STATE = "request-mirror";

    /** {@link ModelFingerprint} of this subtask's model, recorded in every mirror. */
    private transient String modelFingerprint;
    private transient CompletedRequests completed;

    GenerateOperator(StreamOperatorParameters<Response> parameters, EngineFactory engineFactory,
                     GenerateSettings settings) {
        super(parameters, engineFactory, settings, MIRROR_STATE);
    }

    @Override
    public void initializeState(StateInitializationContext context) throws Exception {
        super.initializeState(context);
        completed = new CompletedRequests(context.getKeyedStateStore(), settings.requestIdRetention());
    }

    @Override
    public void open() throws Exception {
        modelFingerprint = ModelFingerprint.of(engineFactory, settings);
        super.open();
    }

    @Override
    void restoreRequests() throws Exception {
        resumeMirroredRequests(modelFingerprint);
    }

    @Override
    void arrived(GenerateRequest request) throws Exception {
        if (submitArrived(request, completed)) {
            admit(request.getRequestId(), LiveRequest.arrived(request, now()));
        }
    }

    @Override
    public void prepareSnapshotPreBarrier(long checkpointId) throws Exception {
        super.prepareSnapshotPreBarrier(checkpointId);
        saveMirrors(modelFingerprint);
    }

    @Override
    void served() throws Exception {
        completed.record(now());
    }

    /**
     * The next step is due 1 ms after this one was: back to back whenever a step takes longer than that (Flink
     * fires a timer whose time has passed at once), at most 1000 steps a second otherwise. After a step before
     * which requests arrived, the next waits {@link #ARRIVAL_WINDOW_MILLIS} from now instead, so the rest of a
     * burst is admitted together.
     */
    @Override
    long nextStepAt(long dueTime, long startedAt, boolean admitted) {
        return admitted ? now() + ARRIVAL_WINDOW_MILLIS : dueTime + 1;
    }
}
