package org.mstar.jobs;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.mstar.flink.EngineFactory;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.TokenEvent;

/**
 * Serves loads through one Flink job in this process (the in-process broker, RocksDB checkpoints, the generate
 * operator, an exactly-once sink unless told otherwise), as a client of it would: a sender thread produces each
 * request when it arrives (offline: all at once; or one as another finishes), and this thread reads the responses
 * topic {@code read_committed}, timing each token when the client reads it. Under exactly-once, tokens become
 * readable at checkpoints, so the client's latencies include that wait; throughput counts to the last token read.
 */
final class JobLoadRunner implements AutoCloseable {
    private final JobClient job;
    private final GenerateClient client;
    private final JobRest rest;
    /** The random adapters the requests are spread over; 0: none. */
    private final int adapters;
    /** Found at the first profiled run, when the tasks run and their metrics exist. */
    private JobMetrics.Tasks tasks;
    private int runs;
    /** Tokens the client read from this job: the generate operator emitted as many. */
    private long tokensServed;
    private long lastStatusCheck;

    /** A row served, and where the job's time went in it. */
    record ProfiledRun(ServingTrace trace, JobRowProfile profile, JobMetrics.Tasks tasks) {}

    private JobLoadRunner(JobClient job, GenerateClient client, JobRest rest, int adapters) {
        this.job = job;
        this.client = client;
        this.rest = rest;
        this.adapters = adapters;
    }

    /**
     * @param options Flink and mstar options of the job, over those the bench sets
     * @param adapters the random LoRA adapters the requests are spread over ({@link ServingLoad#adapter}); 0: none
     */
    static JobLoadRunner start(EmbeddedKafkaBroker broker, EngineFactory factory, DeliveryGuarantee delivery,
            long checkpointMillis, String device, Map<String, String> options, Path work, int adapters)
            throws Exception {
        String requests = "serving-requests";
        String responses = "serving-responses";
        broker.createTopics(1, requests, responses);
        Configuration conf = PipelineBench.jobConfig("serving", checkpointMillis, 5, 0, device, work);
        conf.addAll(Configuration.fromMap(options));
        String restUrl = JobRest.expose(conf);
        JobClient job = PipelineBench.startJob(broker, requests, responses, factory, delivery, conf,
                "mstar bench-serving");
        return new JobLoadRunner(job, new GenerateClient(broker.bootstrapServers(), requests, responses),
                new JobRest(restUrl, job.getJobID().toString()), adapters);
    }

    /**
     * {@link #run}, with the job's metrics read before and after the row and the checkpoints triggered during it
     * (outside the row's time).
     */
    ProfiledRun runProfiled(ServingLoad load, int concurrency, int vocabSize, long timeoutSeconds,
            ServingProgress progress) throws Exception {
        if (tasks == null) {
            tasks = JobMetrics.Tasks.find(rest, rest.vertices());
        }
        JobMetrics before = JobMetrics.read(rest, tasks, tokensServed);
        long startMillis = System.currentTimeMillis();
        ServingTrace trace = run(load, concurrency, vocabSize, timeoutSeconds, progress);
        long readMillis = startMillis + Math.round(trace.seconds() * 1e3);
        JobMetrics after = JobMetrics.read(rest, tasks, tokensServed);
        CheckpointStats.Window checkpoints = CheckpointStats.read(rest, rest.vertices(), startMillis, readMillis);
        return new ProfiledRun(trace, JobRowProfile.of(before, after, startMillis, readMillis, checkpoints, tasks),
                tasks);
    }

    /** @param concurrency requests kept in flight; 0 sends each at its arrival time */
    ServingTrace run(ServingLoad load, int concurrency, int vocabSize, long timeoutSeconds, ServingProgress progress)
            throws Exception {
        String tag = "run" + (runs++) + "-";
        List<ServingLoad.Request> requests = load.requests();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        Semaphore slots = new Semaphore(concurrency);
        long start = System.nanoTime();
        ServingTrace trace = new ServingTrace(load, start);
        long[] arrived = new long[requests.size()];
        Thread sender = new Thread(() -> {
            try {
                if (concurrency == 0 && requests.stream().allMatch(r -> r.arrivalSeconds() == 0)) {
                    List<GenerateRequest> all = new ArrayList<>();
                    for (int i = 0; i < requests.size(); i++) {
                        all.add(request(tag, i, requests.get(i), vocabSize, adapters));
                    }
                    long now = System.nanoTime();
                    Arrays.fill(arrived, now);
                    client.sendAll(all, id -> { });
                    return;
                }
                for (int i = 0; i < requests.size(); i++) {
                    if (concurrency > 0) {
                        slots.acquire();
                    } else {
                        LockSupport.parkNanos(start + (long) (requests.get(i).arrivalSeconds() * 1e9) - System.nanoTime());
                    }
                    arrived[i] = System.nanoTime();
                    client.send(request(tag, i, requests.get(i), vocabSize, adapters));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                errors.add("sending: " + e);
            }
        }, "bench-serving-sender");
        sender.setDaemon(true);
        sender.start();
        boolean done = client.pollUntil(() -> trace.finished() == requests.size() || !errors.isEmpty() || jobEnded(errors),
                Duration.ofSeconds(timeoutSeconds), response -> {
                    long now = System.nanoTime();
                    Object event = response.getEvent();
                    if (event instanceof TokenEvent t && t.getRequestId().startsWith(tag)) {
                        int i = Integer.parseInt(t.getRequestId().substring(tag.length()));
                        int before = trace.finished();
                        trace.token(i, now);
                        if (concurrency > 0 && trace.finished() > before) {
                            slots.release();
                        }
                    } else if (event instanceof ErrorEvent e) {
                        errors.add(e.getRequestId() + ": " + e.getCode() + " " + e.getMessage());
                    }
                    progress.update(trace);
                });
        sender.interrupt();
        sender.join(TimeUnit.SECONDS.toMillis(10));
        if (!errors.isEmpty() || !done) {
            throw new IllegalStateException(load.name() + " through the job: " + trace.finished() + " of "
                    + requests.size() + " finished" + (errors.isEmpty() ? " in " + timeoutSeconds + " s" : "; " + errors));
        }
        for (int i = 0; i < arrived.length; i++) {
            trace.arrived(i, arrived[i]);
        }
        tokensServed += trace.tokens();
        return trace;
    }

    /** Whether the job stopped (it failed, or ended) — checked at most once a second; says so in {@code errors}. */
    private boolean jobEnded(List<String> errors) {
        long now = System.nanoTime();
        if (now - lastStatusCheck < 1_000_000_000L) {
            return false;
        }
        lastStatusCheck = now;
        try {
            JobStatus status = job.getJobStatus().get();
            if (status.isGloballyTerminalState()) {
                errors.add("the job is " + status + jobFailure());
                return true;
            }
        } catch (Exception e) {
            errors.add("the job's status is unknown: " + e);
            return true;
        }
        return false;
    }

    private String jobFailure() {
        try {
            job.getJobExecutionResult().get();
            return "";
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            return ": " + cause;
        }
    }

    private static GenerateRequest request(String tag, int i, ServingLoad.Request r, int vocabSize, int adapters) {
        List<Integer> prompt = new ArrayList<>(r.promptLen());
        for (int id : ServingLoad.prompt(i, r.promptLen(), vocabSize)) {
            prompt.add(id);
        }
        return GenerateRequest.newBuilder()
                .setRequestId(tag + i)
                .setPromptTokenIds(prompt)
                .setMaxTokens(r.outputLen())
                .setTemperature(0.0)
                .setIgnoreEos(true)
                .setAdapter(ServingLoad.adapter(i, adapters))
                .build();
    }

    @Override
    public void close() throws Exception {
        client.close();
        job.cancel().get();
    }
}
