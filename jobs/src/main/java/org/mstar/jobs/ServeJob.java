package org.mstar.jobs;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Properties;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.DeploymentOptions;
import org.apache.flink.configuration.ExternalResourceOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.LocalStreamEnvironment;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.NetUtils;
import org.apache.flink.util.TimeUtils;
import org.mstar.flink.BackpressureCheckpoints;
import org.mstar.flink.DeviceAssignment;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.KafkaClientProperties;
import org.mstar.flink.KafkaIoOptions;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.ModelFingerprint;
import picocli.CommandLine;

/**
 * The job {@code mstar serve} runs, configured from its flags. It is durable by default: RocksDB with incremental
 * checkpoints under the state directory, kept when the job is cancelled or fails (or its process dies), and a
 * rerun resumes from the latest completed one, provided it was taken with the same model, topics and state
 * format (see {@link ServeManifest}).
 */
final class ServeJob {
    private ServeJob() {}

    /** The state directory holds checkpoints this run must not resume; the message says why and what to do. */
    static final class StateRefused extends Exception {
        StateRefused(String message) {
            super(message);
        }
    }

    /**
     * Checks Kafka (creating missing topics) and the state directory, builds the job and runs it until it ends
     * (under {@code flink run -d}, submits it). Says where the job starts from, then, once it runs, what it serves
     * and where to look, one line each.
     *
     * @param err where those lines go
     * @throws KafkaCheck.KafkaUnavailable no broker answered, or a topic is missing and cannot be created
     * @throws StateRefused the state directory holds checkpoints of other settings
     */
    static void run(ServeCommand flags, PrintWriter err) throws Exception {
        Configuration conf = configuration(flags);
        StreamExecutionEnvironment where = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        boolean local = where instanceof LocalStreamEnvironment;
        String model = model(flags, conf, local, err);
        boolean restPortChosenHere = local && !conf.contains(RestOptions.BIND_PORT);
        if (local) {
            bindLocally(conf);
            // the running line waits for the engines' metrics (see TasksStarted)
            setIfAbsent(conf, MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, METRICS_AGE);
        }
        StringWriter startsFrom = new StringWriter(); // said once Kafka answered: a failure is one line alone
        prepareState(flags, conf, new PrintWriter(startsFrom, true));
        KafkaCheck.topics(flags.topics.bootstrapServers, KafkaClientProperties.from(conf.toMap()),
                List.of(flags.topics.requestsTopic, flags.topics.responsesTopic), true,
                flags.parallelism == null ? 1 : flags.parallelism, KafkaCheck.TIMEOUT);
        say(err, startsFrom.toString().strip());
        Integer parallelism = generateParallelism(flags, conf);
        if (parallelism != null) {
            shareGpus(conf, parallelism);
        }
        GenerationPipeline.Builder builder = GenerationPipeline.builder().configure(conf);
        if (parallelism != null) {
            builder.parallelism(parallelism);
        }
        GenerationPipeline pipeline = builder.build();
        JobClient job = TakenRestPortRetry.start(conf, restPortChosenHere, () -> {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
            pipeline.addTo(env);
            return env.executeAsync("mstar serve");
        });
        if (!local && !where.getConfiguration().get(DeploymentOptions.ATTACHED)) { // flink run -d
            say(err, "Submitted job " + job.getJobID() + " (detached).");
            return;
        }
        awaitRunning(job);
        if (local) {
            TasksStarted.await(restUrl(conf), job.getJobID().toString(), pipeline.engineOperators(),
                    job.getJobExecutionResult());
        }
        say(err, runningLine(flags, conf, model, local ? restUrl(conf) : "those of the Flink cluster", local));
        job.getJobExecutionResult().get();
    }

    /**
     * The model to serve, as shown to the user: {@code --random} writes (or finds) its checkpoint and sets it as the
     * model folder; a local run checks that {@code --model} is one.
     *
     * @throws CommandLine.ParameterException naming the flag, when its folder is not a model folder
     */
    private static String model(ServeCommand flags, Configuration conf, boolean local, PrintWriter err) {
        try {
            if (flags.random != null) {
                java.nio.file.Path dir = ModelSource.resolve(null, flags.random, err);
                conf.set(GenerateOptions.MODEL_DIR, dir.toString());
                String shown = "random weights of " + (flags.random.isEmpty() ? "a tiny Llama" : flags.random) + " ("
                        + dir + ")";
                if (flags.randomAdapters == null) {
                    return shown;
                }
                java.nio.file.Path adapters = ModelSource.randomAdapters(dir, flags.randomAdapters);
                conf.set(LlamaEngineOptions.ADAPTERS_DIR, adapters.toString());
                int n = flags.randomAdapters;
                return shown + (n == 1 ? " with 1 random adapter (random-1, " : " with " + n + " random adapters"
                        + " (random-1 ... random-" + n + ", ") + adapters + ")";
            }
            if (flags.model != null && local) {
                ModelSource.resolve(java.nio.file.Path.of(flags.model), null, err);
            }
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(flags.spec.commandLine(), e.getMessage());
        }
        return conf.getOptional(GenerateOptions.MODEL_DIR).orElse("(chosen by " + conf.get(GenerateOptions.ENGINE_FACTORY) + ")");
    }

    /**
     * Binds what the local cluster listens on to 127.0.0.1 unless -D chose otherwise: its REST endpoint (web UI, job
     * status, metrics) at the first port of {@link #REST_PORTS} free now, chosen here so that the running line can name
     * it (Flink takes a port of a range without telling which), and its blob server.
     */
    static void bindLocally(Configuration conf) {
        setIfAbsent(conf, JobManagerOptions.BIND_HOST, "127.0.0.1");
        setIfAbsent(conf, TaskManagerOptions.BIND_HOST, "127.0.0.1");
        setIfAbsent(conf, RestOptions.BIND_ADDRESS, "127.0.0.1");
        setIfAbsent(conf, RestOptions.ADDRESS, conf.get(RestOptions.BIND_ADDRESS));
        if (!conf.contains(RestOptions.BIND_PORT)) {
            conf.set(RestOptions.BIND_PORT, freePort(conf.get(RestOptions.BIND_ADDRESS), REST_PORTS));
        }
    }

    /** How old the local REST endpoint's metrics may be (Flink's default: 10 s). */
    static final Duration METRICS_AGE = Duration.ofMillis(500);

    /** Ports the local REST endpoint may take, the first free one: Flink's default first. */
    static final String REST_PORTS = "8081-8180";

    /** The first port of {@code ports} that {@code address} can bind now, or the range when none can. */
    static String freePort(String address, String ports) {
        for (Iterator<Integer> it = NetUtils.getPortRangeFromString(ports); it.hasNext(); ) {
            int port = it.next();
            try (ServerSocket probe = new ServerSocket(port, 1, InetAddress.getByName(address))) {
                return Integer.toString(port);
            } catch (IOException taken) {
                // in use: the next
            }
        }
        return ports;
    }

    /** The URL of the local REST endpoint: its port, or the range Flink took one of when -D gave a range. */
    static String restUrl(Configuration conf) {
        return "http://" + conf.get(RestOptions.BIND_ADDRESS) + ":" + conf.get(RestOptions.BIND_PORT);
    }

    /** Waits until the job runs; throws its failure when it ends first. */
    private static void awaitRunning(JobClient job) throws Exception {
        while (true) {
            JobStatus status = job.getJobStatus().get();
            if (status == JobStatus.RUNNING) {
                return;
            }
            if (status.isGloballyTerminalState()) {
                job.getJobExecutionResult().get(); // throws the failure
                return;
            }
            Thread.sleep(50); // polling the status: JobClient offers no notification
        }
    }

    /** The devices the engines run on, as the running line says them: both sides' when prefill and decode split. */
    /**
     * Generate subtasks: {@code --parallelism}, else one per GPU that {@code --device} lists (each engine sizes itself
     * to the device's memory, so two on one GPU would find the second without room), else the job's default.
     */
    static Integer generateParallelism(ServeCommand flags, Configuration conf) {
        if (flags.parallelism != null) {
            return flags.parallelism;
        }
        int gpus = DeviceAssignment.listedGpus(conf.get(GenerateOptions.DEVICE));
        return gpus > 0 ? gpus : null;
    }

    /**
     * With more generate subtasks than listed GPUs (subtask i runs on entry i modulo the list), the engines on one GPU
     * split its memory, unless {@code mstar.engine.engines-per-device} was set.
     */
    static void shareGpus(Configuration conf, int parallelism) {
        int gpus = DeviceAssignment.listedGpus(conf.get(GenerateOptions.DEVICE));
        if (gpus > 0 && parallelism > gpus && conf.getOptional(LlamaEngineOptions.ENGINES_PER_DEVICE).isEmpty()) {
            conf.set(LlamaEngineOptions.ENGINES_PER_DEVICE, (parallelism + gpus - 1) / gpus);
        }
    }

    static String devices(Configuration conf, boolean local) {
        String device = conf.get(GenerateOptions.DEVICE);
        if (!conf.get(DisaggregationOptions.ENABLED)) {
            return "device " + device(device, conf, local);
        }
        return "prefill device " + device(conf.getOptional(DisaggregationOptions.PREFILL_DEVICE).orElse(device), conf,
                local) + ", decode device " + device(conf.getOptional(DisaggregationOptions.DECODE_DEVICE)
                .orElse(device), conf, local);
    }

    /**
     * {@code setting} as chosen: auto is cpu on a local cluster that lists no GPU resource (the engines resolve it
     * so, DeviceAssignment), and on a cluster a GPU its TaskManagers list, else cpu, per subtask.
     */
    private static String device(String setting, Configuration conf, boolean local) {
        if (!setting.equals("auto")) {
            return setting;
        }
        String gpu = conf.get(GenerateOptions.GPU_RESOURCE);
        boolean listed = conf.getOptional(ExternalResourceOptions.EXTERNAL_RESOURCE_LIST).orElse(List.of())
                .contains(gpu);
        return local && !listed ? "cpu (auto: this local cluster lists no '" + gpu + "' resource)"
                : "auto (per subtask, a GPU that Flink's '" + gpu + "' resource lists, else cpu)";
    }

    /** The line that says the job runs: from where to where, what, how responses are delivered, where to look. */
    static String runningLine(ServeCommand flags, Configuration conf, String model, String rest, boolean local) {
        DeliveryGuarantee delivery = conf.get(KafkaIoOptions.DELIVERY_GUARANTEE);
        String latency = delivery == DeliveryGuarantee.EXACTLY_ONCE
                ? "responses reach read_committed consumers at each checkpoint, every "
                        + TimeUtils.formatWithHighestUnit(conf.get(CheckpointingOptions.CHECKPOINTING_INTERVAL))
                : "responses are visible as generated; after a failure consumers drop repeats by (request id, index)";
        return "mstar serve is running: Kafka " + flags.topics.bootstrapServers + kafkaClient(conf) + ", topics "
                + flags.topics.requestsTopic + " -> " + flags.topics.responsesTopic + ", model " + model
                + ", " + devices(conf, local) + ", delivery " + delivery + " (" + latency + ")"
                + ", state " + stateRoot(flags.stateDir).getPath() + ", REST and metrics " + rest
                + (flags.metricsPort == null ? "" : ", Prometheus metrics at port " + flags.metricsPort + " (/metrics)")
                + ". Ctrl-C stops it; the same command resumes.";
    }

    /** The Kafka client properties as a person may see them (secrets hidden), or nothing when there are none. */
    private static String kafkaClient(Configuration conf) {
        Properties client = KafkaClientProperties.from(conf.toMap());
        return client.isEmpty() ? "" : " (" + KafkaClientProperties.describe(client) + ")";
    }

    /**
     * The -D options (with those of --kafka-properties as mstar.kafka.*), overridden by the flags; RocksDB and a
     * checkpoint interval unless -D chose otherwise.
     */
    static Configuration configuration(ServeCommand flags) {
        Configuration conf = Configuration.fromMap(flags.kafkaClient.addTo(flags.options));
        conf.set(KafkaIoOptions.BOOTSTRAP_SERVERS, flags.topics.bootstrapServers);
        conf.set(KafkaIoOptions.REQUESTS_TOPIC, flags.topics.requestsTopic);
        conf.set(KafkaIoOptions.RESPONSES_TOPIC, flags.topics.responsesTopic);
        conf.set(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX, flags.transactionalIdPrefix);
        setIfGiven(conf, KafkaIoOptions.GROUP_ID, flags.groupId);
        setIfGiven(conf, KafkaIoOptions.DELIVERY_GUARANTEE,
                flags.delivery == null ? null : DeliveryGuarantee.valueOf(flags.delivery.toUpperCase(Locale.ROOT)));
        setIfGiven(conf, GenerateOptions.ENGINE_FACTORY, flags.engineFactory);
        setIfGiven(conf, GenerateOptions.MODEL_DIR, flags.model);
        setIfGiven(conf, GenerateOptions.DEVICE, flags.device);
        setIfGiven(conf, GenerateOptions.AUDIO_DIR,
                flags.audioDir == null ? null : flags.audioDir.toAbsolutePath().normalize().toString());
        setIfGiven(conf, LlamaEngineOptions.ADAPTERS_DIR,
                flags.adaptersDir == null ? null : flags.adaptersDir.toAbsolutePath().normalize().toString());
        setIfGiven(conf, LlamaEngineOptions.QUANTIZATION, flags.quantization);
        setIfGiven(conf, LlamaEngineOptions.TENSOR_PARALLEL, flags.tensorParallel);
        setIfGiven(conf, LlamaEngineOptions.KV_CACHE_DTYPE, flags.kvCacheDType);
        if (flags.disaggregated) {
            conf.set(DisaggregationOptions.ENABLED, true);
        }
        setIfGiven(conf, DisaggregationOptions.PREFILL_PARALLELISM, flags.prefillParallelism);
        setIfGiven(conf, DisaggregationOptions.DECODE_PARALLELISM, flags.decodeParallelism);
        setIfGiven(conf, DisaggregationOptions.PREFILL_DEVICE, flags.prefillDevice);
        setIfGiven(conf, DisaggregationOptions.DECODE_DEVICE, flags.decodeDevice);
        if (flags.metricsPort != null) {
            PrometheusEndpoint.configure(conf, flags.metricsPort);
        }
        setIfAbsent(conf, CheckpointingOptions.CHECKPOINTING_INTERVAL, flags.checkpointInterval);
        // Flink fails (and counts failed) a checkpoint triggered while any task is not yet RUNNING, and starts
        // triggering as the job starts, the first at a random time up to one interval later; the tasks take about a
        // second or two to start. A pause of one interval puts the first checkpoint one interval after the start.
        setIfAbsent(conf, CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS,
                conf.get(CheckpointingOptions.CHECKPOINTING_INTERVAL));
        setIfAbsent(conf, StateBackendOptions.STATE_BACKEND, "rocksdb");
        setIfAbsent(conf, CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        setIfAbsent(conf, CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY,
                new Path(stateRoot(flags.stateDir), StateDirectory.CHECKPOINTS).toString());
        ChangelogCheckpoints.applyTo(conf, new Path(stateRoot(flags.stateDir), StateDirectory.CHANGELOG).toString());
        return BackpressureCheckpoints.applyTo(conf);
    }

    /**
     * Checks the state directory against this run and sets where the job starts: the latest completed checkpoint
     * (claimed, so Flink deletes it once a newer one completes), a restore path given with -D, or nothing after
     * {@code --fresh} or on the first run. Says which in one line on {@code err}.
     *
     * @throws StateRefused the checkpoints were taken under other settings
     */
    static void prepareState(ServeCommand flags, Configuration conf, PrintWriter err) throws IOException, StateRefused {
        StateDirectory dir = new StateDirectory(stateRoot(flags.stateDir));
        ServeManifest now = manifest(conf);
        if (conf.contains(StateRecoveryOptions.SAVEPOINT_PATH)) {
            say(err, "Restoring from " + conf.get(StateRecoveryOptions.SAVEPOINT_PATH) + " (given with -D"
                    + StateRecoveryOptions.SAVEPOINT_PATH.key() + "); checkpoints go to " + dir.checkpoints());
        } else if (flags.fresh) {
            boolean had = dir.hasCheckpoints();
            dir.clear();
            say(err, had ? "Starting fresh (--fresh): deleted the checkpoints under " + dir.root()
                    : "Starting fresh (--fresh); checkpoints go to " + dir.checkpoints());
        } else {
            dir.pruneEmptyRuns();
            Optional<StateDirectory.Checkpoint> latest = dir.latestCheckpoint();
            if (latest.isPresent()) {
                // settings matter only where there is something to resume (a start that failed early leaves none)
                Optional<ServeManifest> then = dir.readManifest();
                if (then.isEmpty()) {
                    throw refused(dir, List.of("no " + StateDirectory.MANIFEST + " beside them (not written by this"
                            + " version of mstar serve)"));
                }
                if (!then.get().differencesFrom(now).isEmpty()) {
                    throw refused(dir, then.get().differencesFrom(now));
                }
                StateDirectory.Checkpoint c = latest.get();
                conf.set(StateRecoveryOptions.SAVEPOINT_PATH, c.path().toString());
                setIfAbsent(conf, StateRecoveryOptions.RESTORE_MODE, RecoveryClaimMode.CLAIM);
                say(err, "Resuming from checkpoint " + c.id() + " (" + c.path() + ", completed " + c.completed()
                        + ")");
            } else {
                say(err, "No checkpoint under " + dir.root() + " yet: starting from the consumer group's committed"
                        + " offsets (else the earliest); checkpoints go to " + dir.checkpoints());
            }
        }
        dir.writeManifest(now);
    }

    /** What this run's checkpoints are taken with. */
    static ServeManifest manifest(Configuration conf) {
        String factory = conf.get(GenerateOptions.ENGINE_FACTORY);
        Optional<String> model = conf.getOptional(GenerateOptions.MODEL_DIR);
        String fingerprint;
        if (model.isPresent() && Files.isDirectory(java.nio.file.Path.of(model.get()))) {
            fingerprint = ModelFingerprint.of(factory, java.nio.file.Path.of(model.get()));
        } else {
            // Not readable here (e.g. only on the TaskManagers): its path stands for it.
            fingerprint = ModelFingerprint.of(factory + " " + model.orElse(""), null);
        }
        return new ServeManifest(ServeManifest.STATE_FORMAT, fingerprint, model.orElse("(none)"),
                conf.get(KafkaIoOptions.REQUESTS_TOPIC), conf.get(KafkaIoOptions.RESPONSES_TOPIC),
                conf.getOptional(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX).orElse(""));
    }

    /** {@code dir} as given when it names a scheme, else as a local folder relative to the working directory. */
    static Path stateRoot(String dir) {
        Path given = new Path(dir);
        if (given.toUri().getScheme() != null) {
            return given;
        }
        return new Path(java.nio.file.Path.of(dir).toAbsolutePath().normalize().toUri());
    }

    private static StateRefused refused(StateDirectory dir, List<String> differences) {
        return new StateRefused("Not resuming from " + dir.root() + ": its checkpoints were taken with "
                + String.join(", ", differences) + ". Run with the settings they were taken with, start over with"
                + " --fresh (deletes them), or choose another --state-dir.");
    }

    private static void say(PrintWriter err, String line) {
        err.println(line);
        err.flush();
    }

    private static <T> void setIfGiven(Configuration conf, ConfigOption<T> option, T value) {
        if (value != null) {
            conf.set(option, value);
        }
    }

    private static <T> void setIfAbsent(Configuration conf, ConfigOption<T> option, T value) {
        if (!conf.contains(option)) {
            conf.set(option, value);
        }
    }
}
