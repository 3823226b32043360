package org.mstar.jobs;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.ServiceLoader;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.mstar.engine.EngineSizing;

/**
 * A side of {@code mstar bench-serving} beyond the bare engine and the DataStream job, found with {@link ServiceLoader}
 * on the class path: flink-mstar-sql's {@code ML_PREDICT} job ({@code --sides ...,sql}). The sql module depends on
 * this one, so this one names only this interface, and the side exists where both modules and Flink's table planner
 * are on the class path (the pipeline bundle).
 */
public interface BenchServingSide {
    /** Its name in {@code --sides}. */
    String name();

    /**
     * Serves one offline row: starts the side's job, warms it up, sends every request at once, and returns when each
     * is answered (or fails: a request unanswered in the time, an answer of the wrong length, the job ending).
     */
    void serveOffline(Setup setup, List<Request> requests, Recorder recorder) throws Exception;

    /**
     * What a side serves with, the same as the DataStream job's.
     *
     * @param jobConfig the job's configuration (checkpoints, state backend, restarts, device)
     * @param modelDir the model folder; for random weights (see {@link SharedWeightsEngineFactory}) it holds
     *     config.json only
     * @param engineFactory class name of the engine factory, with a public (ReadableConfig) constructor
     * @param maxSeqLen the engines' longest sequence
     * @param sizing what the flags set of the engine's size; the rest is sized from the device
     * @param work a scratch folder of this run
     */
    record Setup(String bootstrapServers, Configuration jobConfig, DeliveryGuarantee delivery, Path modelDir,
                 String device, String engineFactory, int maxSeqLen, EngineSizing.Request sizing,
                 Duration timeout, Path work) {}

    /** A request of a row: a prompt of {@code promptLen} tokens, answered with {@code outputLen} (EOS ignored). */
    record Request(int promptLen, int outputLen) {}

    /** Where a side records its times (System.nanoTime). */
    interface Recorder {
        /** Every request was sent at {@code nanos}. */
        void sent(long nanos);

        /** Request {@code index}'s whole answer, of {@code outputTokens} tokens, was read at {@code nanos}. */
        void answered(int index, int outputTokens, long nanos);
    }

    /** The side called {@code name} on the class path. */
    static Optional<BenchServingSide> find(String name) {
        return ServiceLoader.load(BenchServingSide.class).stream().map(ServiceLoader.Provider::get)
                .filter(side -> side.name().equals(name)).findFirst();
    }
}
