package org.mstar.sql;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.RequestFailure;
import org.mstar.engine.StepResult;
import org.mstar.resources.RequestValidationException;

/**
 * Drives one {@link GenerationEngine} from a thread of its own, so that the rows an async {@code ML_PREDICT} has
 * pending share its steps: whatever was submitted while a step ran joins the next one, up to the engine's row cap
 * and token budget, and every request completes its future when the engine finishes or refuses it.
 *
 * <p>The engine is single-threaded: only this loop's thread touches it, from the first submission to
 * {@link #close}. A step that throws fails every pending future with that exception (the job then fails over and
 * Flink re-runs the rows it had in flight) and stops the loop; closing leaves pending futures incomplete.
 */
final class EngineLoop implements AutoCloseable {
    private final GenerationEngine engine;
    private final BlockingQueue<Submission> arrivals = new LinkedBlockingQueue<>();
    /** Requests the engine holds, by id; the loop thread's own. */
    private final Map<String, CompletableFuture<FinishedRequest>> live = new HashMap<>();
    private final Thread thread;
    /** Set once the loop has stopped: by close, or by a step that threw (then the cause). */
    private volatile Throwable stopped;
    private volatile long steps;
    /** Most rows that got a token in one step: how wide the batches became. */
    private volatile int widestStep;

    /** Why a submission after {@link #close} fails. */
    private static final class LoopClosed extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        LoopClosed() {
            super("the model's engine was closed");
        }
    }

    private record Submission(GenerationRequest request, CompletableFuture<FinishedRequest> done) {}

    /** @param name names the loop's thread (the task's subtask, for thread dumps) */
    EngineLoop(GenerationEngine engine, String name) {
        this.engine = engine;
        this.thread = new Thread(this::run, name);
        thread.setDaemon(true);
        thread.start();
    }

    /**
     * Queues {@code request} for the next step. The future completes with the finished request, or exceptionally
     * with a {@link RowFailure} when the engine refuses or fails it, or with the engine's exception.
     */
    CompletableFuture<FinishedRequest> submit(GenerationRequest request) {
        CompletableFuture<FinishedRequest> done = new CompletableFuture<>();
        Throwable cause = stopped;
        if (cause != null) {
            done.completeExceptionally(cause);
            return done;
        }
        arrivals.add(new Submission(request, done));
        if (stopped != null && !(stopped instanceof LoopClosed)) {
            failQueued(stopped); // the step failed between the check and the add
        }
        return done;
    }

    private void run() {
        try {
            while (stopped == null) {
                // idle: wait for a row; busy: take whatever arrived during the last step, without waiting
                admit(engine.hasWork() ? arrivals.poll() : arrivals.take());
                if (engine.hasWork()) {
                    StepResult result = engine.step();
                    steps++;
                    widestStep = Math.max(widestStep, result.tokens().size());
                    emit(result);
                }
            }
        } catch (InterruptedException e) {
            // closed
        } catch (Throwable t) {
            stop(t);
        }
    }

    /** Submits {@code first} (may be null) and everything else that arrived meanwhile. */
    private void admit(Submission first) {
        List<Submission> batch = new ArrayList<>();
        if (first != null) {
            batch.add(first);
        }
        arrivals.drainTo(batch);
        for (Submission s : batch) {
            String id = s.request().requestId();
            try {
                engine.submit(s.request());
                live.put(id, s.done());
            } catch (RequestValidationException e) {
                s.done().completeExceptionally(new RowFailure(400, e.getMessage()));
            }
        }
    }

    private void emit(StepResult result) {
        for (FinishedRequest finished : result.finished()) {
            CompletableFuture<FinishedRequest> done = live.remove(finished.requestId());
            if (done != null) {
                done.complete(finished);
            }
        }
        for (RequestFailure failure : result.failures()) {
            CompletableFuture<FinishedRequest> done = live.remove(failure.requestId());
            if (done != null) {
                done.completeExceptionally(new RowFailure(failure.code(), failure.message()));
            }
        }
    }

    /** Engine steps run so far. */
    long steps() {
        return steps;
    }

    /** Most rows that got a token in one step so far. */
    int widestStep() {
        return widestStep;
    }

    private void stop(Throwable cause) {
        stopped = cause;
        live.values().forEach(f -> f.completeExceptionally(cause));
        live.clear();
        failQueued(cause);
    }

    private void failQueued(Throwable cause) {
        List<Submission> queued = new ArrayList<>();
        arrivals.drainTo(queued);
        queued.forEach(s -> s.done().completeExceptionally(cause));
    }

    /**
     * Stops the loop and closes the engine. Rows still pending are left incomplete, not failed: the task is closing
     * (a failover, a cancel, a stop with a savepoint), the async operator has them in its state, and a restore runs
     * them again; completing them exceptionally here would fail a stop with a savepoint.
     */
    @Override
    public void close() throws InterruptedException {
        if (stopped == null) {
            stopped = new LoopClosed();
        }
        thread.interrupt();
        thread.join();
        live.clear();
        arrivals.clear();
        engine.close();
    }
}
