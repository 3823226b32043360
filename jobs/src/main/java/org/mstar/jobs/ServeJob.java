package org.mstar.jobs;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.KafkaIoOptions;
import org.mstar.flink.ModelFingerprint;

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
     * Builds the job and runs it until it ends (or, under {@code flink run -d}, submits it).
     *
     * @param err where the one line saying where the job starts from goes
     */
    static void run(ServeCommand flags, PrintWriter err) throws Exception {
        Configuration conf = configuration(flags);
        prepareState(flags, conf, err);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        GenerationPipeline.Builder builder = GenerationPipeline.builder().configure(conf);
        if (flags.parallelism != null) {
            builder.parallelism(flags.parallelism);
        }
        builder.build().addTo(env);
        env.execute("mstar serve");
    }

    /** The -D options, overridden by the flags; RocksDB and a checkpoint interval unless -D chose otherwise. */
    static Configuration configuration(ServeCommand flags) {
        Configuration conf = Configuration.fromMap(flags.options);
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
        if (flags.disaggregated) {
            conf.set(DisaggregationOptions.ENABLED, true);
        }
        setIfGiven(conf, DisaggregationOptions.PREFILL_PARALLELISM, flags.prefillParallelism);
        setIfGiven(conf, DisaggregationOptions.DECODE_PARALLELISM, flags.decodeParallelism);
        setIfGiven(conf, DisaggregationOptions.PREFILL_DEVICE, flags.prefillDevice);
        setIfGiven(conf, DisaggregationOptions.DECODE_DEVICE, flags.decodeDevice);
        setIfAbsent(conf, CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofSeconds(flags.checkpointSeconds));
        setIfAbsent(conf, StateBackendOptions.STATE_BACKEND, "rocksdb");
        setIfAbsent(conf, CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
        setIfAbsent(conf, CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY,
                new Path(stateRoot(flags.stateDir), StateDirectory.CHECKPOINTS).toString());
        return conf;
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
