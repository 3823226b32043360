package org.mstar.flink;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.apache.flink.annotation.Internal;
import org.mstar.engine.GenerationEngine;

/**
 * A subtask's engine, built on a thread of its own. Flink fails, and counts as failed, every checkpoint it triggers
 * while any task of the job is not yet RUNNING, and a task runs only once its operators' {@code open()} returned:
 * an engine built in {@code open()} (seconds to minutes of weights and KV memory) failed every checkpoint triggered
 * meanwhile. Built here, the task runs at once and its checkpoints wait for nothing; engines take calls from any
 * thread (see {@link DeviceTurn}).
 */
@Internal
final class EngineStart implements AutoCloseable {
    private final CompletableFuture<GenerationEngine> built = new CompletableFuture<>();

    private EngineStart() {}

    /** Starts {@code build} on a daemon thread named {@code threadName}. */
    static EngineStart begin(String threadName, Callable<GenerationEngine> build) {
        EngineStart start = new EngineStart();
        Thread thread = new Thread(() -> {
            try {
                start.built.complete(build.call());
            } catch (Throwable t) {
                start.built.completeExceptionally(t);
            }
        }, threadName);
        thread.setDaemon(true);
        thread.start();
        return start;
    }

    /** Runs {@code then} (on the building thread, or at once if it has ended) once the build ended, either way. */
    void whenEnded(Runnable then) {
        built.whenComplete((engine, failure) -> then.run());
    }

    /**
     * The engine, once built: waits for the build.
     *
     * @throws Exception why it could not be built, as {@link StartUpFailures#atEngineBuild} says to throw it
     */
    GenerationEngine engine() throws Exception {
        try {
            return built.get();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception failure) {
                throw StartUpFailures.atEngineBuild(failure);
            }
            throw e;
        }
    }

    /** Closes the engine, waiting for a build under way: what it holds on its device must be freed. */
    @Override
    public void close() throws Exception {
        GenerationEngine engine = built.exceptionally(failure -> null).join();
        if (engine != null) {
            engine.close();
        }
    }
}
