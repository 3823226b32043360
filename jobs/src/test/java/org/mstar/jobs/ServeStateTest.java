package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.changelog.fs.FsStateChangelogOptions;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.StateChangelogOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** How {@code mstar serve} picks up, refuses or discards what its state directory holds; no job is started. */
class ServeStateTest {
    @TempDir
    Path tmp;
    private final StringWriter said = new StringWriter();

    @Test
    void checkpointsAreDurableByDefault() throws Exception {
        Configuration conf = ServeJob.configuration(flags("--model", model("m", "w").toString()));

        assertThat(conf.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY))
                .isEqualTo("file:" + tmp.resolve("state").resolve("checkpoints"));
        assertThat(conf.get(CheckpointingOptions.INCREMENTAL_CHECKPOINTS)).isTrue();
        assertThat(conf.get(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION))
                .isEqualTo(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
    }

    @Test
    void checkpointsTurnUnalignedWhenABurstHoldsTheirBarrierUnlessSetOtherwise() throws Exception {
        String model = model("m", "w").toString();
        Configuration conf = ServeJob.configuration(flags("--model", model));
        assertThat(conf.get(CheckpointingOptions.ENABLE_UNALIGNED)).isTrue();
        assertThat(conf.get(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT)).isEqualTo(Duration.ofMillis(100));

        Configuration set = ServeJob.configuration(flags("--model", model,
                "-Dexecution.checkpointing.unaligned.enabled=false",
                "-Dexecution.checkpointing.aligned-checkpoint-timeout=2 s"));
        assertThat(set.get(CheckpointingOptions.ENABLE_UNALIGNED)).isFalse();
        assertThat(set.get(CheckpointingOptions.ALIGNED_CHECKPOINT_TIMEOUT)).isEqualTo(Duration.ofSeconds(2));
    }

    @Test
    void theFirstCheckpointComesOneIntervalAfterTheStartUnlessSetOtherwise() throws Exception {
        String model = model("m", "w").toString();
        Configuration conf = ServeJob.configuration(flags("--model", model, "--checkpoint-interval", "3"));
        assertThat(conf.get(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS)).isEqualTo(Duration.ofSeconds(3));

        Configuration set = ServeJob.configuration(flags("--model", model, "-Dexecution.checkpointing.min-pause=0 s"));
        assertThat(set.get(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS)).isZero();
    }

    @Test
    void theCheckpointIntervalIsSecondsOrADurationOfAtLeastTenMilliseconds() throws Exception {
        String model = model("m", "w").toString();
        assertThat(ServeJob.configuration(flags("--model", model)).get(CheckpointingOptions.CHECKPOINTING_INTERVAL))
                .isEqualTo(Duration.ofSeconds(2));
        assertThat(ServeJob.configuration(flags("--model", model, "--checkpoint-interval", "3"))
                .get(CheckpointingOptions.CHECKPOINTING_INTERVAL)).isEqualTo(Duration.ofSeconds(3));
        ServeCommand fast = flags("--model", model, "--checkpoint-interval", "250ms");
        Configuration conf = ServeJob.configuration(fast);
        assertThat(conf.get(CheckpointingOptions.CHECKPOINTING_INTERVAL)).isEqualTo(Duration.ofMillis(250));
        assertThat(ServeJob.runningLine(fast, conf, "m", "r", true)).contains("at each checkpoint, every 250 ms");

        assertThatThrownBy(() -> flags("--model", model, "--checkpoint-interval", "5ms"))
                .hasMessageContaining("under Flink's least interval, 10ms");
        assertThatThrownBy(() -> flags("--model", model, "--checkpoint-interval", "soon"))
                .hasMessageContaining("neither seconds nor a duration");
    }

    @Test
    void keyedStateChangesAreLoggedUnderTheStateDirectoryWhenTheChangelogIsTurnedOn() throws Exception {
        String model = model("m", "w").toString();
        Configuration off = ServeJob.configuration(flags("--model", model));
        assertThat(off.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isFalse();
        assertThat(off.contains(FsStateChangelogOptions.BASE_PATH)).isFalse();

        Configuration on = ServeJob.configuration(flags("--model", model, "-Dstate.changelog.enabled=true"));
        assertThat(on.get(StateChangelogOptions.ENABLE_STATE_CHANGE_LOG)).isTrue();
        assertThat(on.get(StateChangelogOptions.STATE_CHANGE_LOG_STORAGE)).isEqualTo("filesystem");
        assertThat(on.get(FsStateChangelogOptions.BASE_PATH))
                .isEqualTo("file:" + tmp.resolve("state").resolve("changelog"));
    }

    @Test
    void theNewestCompletedCheckpointOfAnyRunIsResumedAndSaidSo() throws Exception {
        String model = model("m", "w").toString();
        assertThat(prepare("--model", model).contains(StateRecoveryOptions.SAVEPOINT_PATH)).isFalse();
        assertThat(said.toString()).contains("No checkpoint under");

        checkpoint("run-a", 7, Instant.parse("2026-01-01T00:00:00Z"));
        Path newest = checkpoint("run-b", 3, Instant.parse("2026-01-02T00:00:00Z"));
        Files.createDirectories(tmp.resolve("state/checkpoints/run-b/chk-4")); // cut short: no _metadata
        Configuration conf = prepare("--model", model);

        assertThat(conf.get(StateRecoveryOptions.SAVEPOINT_PATH)).isEqualTo("file:" + newest);
        assertThat(conf.get(StateRecoveryOptions.RESTORE_MODE)).isEqualTo(RecoveryClaimMode.CLAIM);
        assertThat(said.toString().lines().filter(l -> l.startsWith("Resuming from checkpoint 3 ("))).hasSize(1);
    }

    @Test
    void foldersOfEarlierRunsAreDeletedOnceTheyHoldNoFile() throws Exception {
        String model = model("m", "w").toString();
        prepare("--model", model);
        Path kept = checkpoint("run-a", 4, Instant.now());
        Path shared = Files.createDirectories(tmp.resolve("state/checkpoints/run-b/shared"));
        Files.writeString(shared.resolve("sst-17"), "still used by run-a's checkpoint");
        Files.createDirectories(tmp.resolve("state/checkpoints/run-c/shared"));
        Files.createDirectories(tmp.resolve("state/checkpoints/run-c/taskowned"));

        prepare("--model", model);

        assertThat(kept).exists();
        assertThat(shared.resolve("sst-17")).exists();
        assertThat(tmp.resolve("state/checkpoints/run-c")).doesNotExist();
    }

    @Test
    void checkpointsOfAnotherModelOrTopicAreRefusedNamingWhatDiffers() throws Exception {
        prepare("--model", model("a", "weights a").toString());
        checkpoint("run", 2, Instant.now());

        assertThatThrownBy(() -> prepare("--model", model("b", "weights b").toString()))
                .isInstanceOf(ServeJob.StateRefused.class)
                .hasMessageContaining("another model (" + tmp.resolve("a"))
                .hasMessageContaining("now " + tmp.resolve("b"))
                .hasMessageContaining("--fresh");
        assertThatThrownBy(() -> prepare("--model", model("a", "weights a").toString(), "--requests-topic", "other"))
                .isInstanceOf(ServeJob.StateRefused.class)
                .hasMessageContaining("another requests topic ('requests'; now 'other')")
                .hasMessageNotContaining("another model");
        assertThat(prepare("--model", model("a", "weights a").toString())
                .contains(StateRecoveryOptions.SAVEPOINT_PATH)).as("same settings resume").isTrue();
    }

    @Test
    void checkpointsOfAnEarlierStateFormatAreRefused() throws Exception {
        String model = model("m", "w").toString();
        prepare("--model", model);
        checkpoint("run", 3, Instant.now());
        Path manifest = tmp.resolve("state").resolve(StateDirectory.MANIFEST);
        Files.writeString(manifest, Files.readString(manifest).replace("state-format=" + ServeManifest.STATE_FORMAT,
                "state-format=1"));

        assertThatThrownBy(() -> prepare("--model", model)).isInstanceOf(ServeJob.StateRefused.class)
                .hasMessageContaining("another state format (1; this version of mstar serve reads and writes "
                        + ServeManifest.STATE_FORMAT)
                .hasMessageContaining("--fresh");
    }

    @Test
    void aStartThatTookNoCheckpointDoesNotBlockARunUnderOtherSettings() throws Exception {
        prepare("--model", model("a", "weights a").toString()); // e.g. the job then failed to start

        assertThat(prepare("--model", model("b", "weights b").toString())
                .contains(StateRecoveryOptions.SAVEPOINT_PATH)).as("nothing to resume, nothing refused").isFalse();
        checkpoint("run", 1, Instant.now());
        assertThatThrownBy(() -> prepare("--model", model("a", "weights a").toString()))
                .as("the manifest now records model b").isInstanceOf(ServeJob.StateRefused.class);
    }

    @Test
    void freshDeletesTheCheckpointsAndRecordsTheNewSettings() throws Exception {
        prepare("--model", model("a", "weights a").toString());
        checkpoint("run", 2, Instant.now());
        Files.createDirectories(tmp.resolve("state/changelog/some-task"));
        Files.writeString(tmp.resolve("state/changelog/some-task/changes"), "state changes");

        Configuration conf = prepare("--model", model("b", "weights b").toString(), "--fresh");

        assertThat(conf.contains(StateRecoveryOptions.SAVEPOINT_PATH)).isFalse();
        assertThat(said.toString()).contains("Starting fresh (--fresh): deleted the checkpoints");
        assertThat(tmp.resolve("state/checkpoints")).doesNotExist();
        assertThat(tmp.resolve("state/changelog")).doesNotExist();
        assertThat(prepare("--model", model("b", "weights b").toString()).contains(StateRecoveryOptions.SAVEPOINT_PATH))
                .isFalse();
        checkpoint("run-b", 1, Instant.now());
        assertThatThrownBy(() -> prepare("--model", model("a", "weights a").toString()))
                .isInstanceOf(ServeJob.StateRefused.class).hasMessageContaining("another model");
    }

    @Test
    void theCommandExitsWith2AndTheReasonWhenRefused() throws Exception {
        prepare("--model", model("a", "weights a").toString());
        checkpoint("run", 2, Instant.now());
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(new Mstar());
        cli.setErr(new PrintWriter(err, true));

        int code = cli.execute(args("--model", model("b", "weights b").toString()));

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).startsWith("Not resuming from ").contains("another model");
    }

    private Configuration prepare(String... extra) throws Exception {
        ServeCommand flags = flags(extra);
        Configuration conf = ServeJob.configuration(flags);
        ServeJob.prepareState(flags, conf, new PrintWriter(said, true));
        return conf;
    }

    private ServeCommand flags(String... extra) {
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs(args(extra));
        return (ServeCommand) parsed.subcommand().commandSpec().userObject();
    }

    private String[] args(String... extra) {
        List<String> args = new ArrayList<>(List.of("serve", "--bootstrap-servers", "k:9092",
                "--state-dir", tmp.resolve("state").toString()));
        args.addAll(List.of(extra));
        return args.toArray(String[]::new);
    }

    private Path model(String name, String weights) throws Exception {
        Path dir = Files.createDirectories(tmp.resolve(name));
        Files.writeString(dir.resolve("config.json"), "{}");
        Files.writeString(dir.resolve("model.safetensors"), weights);
        return dir;
    }

    /** A completed checkpoint as Flink leaves it: chk-N with a _metadata file, here dated {@code completed}. */
    private Path checkpoint(String run, long id, Instant completed) throws Exception {
        Path chk = Files.createDirectories(tmp.resolve("state/checkpoints").resolve(run).resolve("chk-" + id));
        Path metadata = Files.writeString(chk.resolve("_metadata"), "x");
        Files.setLastModifiedTime(metadata, FileTime.from(completed));
        return chk;
    }
}
