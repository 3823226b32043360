package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.jobs.CancelledJobs.cancel;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.GenerationEngine;
import org.mstar.flink.EngineFactory;
import org.mstar.flink.FakeEngineFactory;
import org.mstar.flink.GenerateOptions;
import org.mstar.flink.GenerationPipeline;
import org.mstar.flink.LlamaEngineFactory;
import org.mstar.flink.LlamaEngineOptions;
import org.mstar.flink.ScenarioEngineFactory;
import org.mstar.flink.ScenarioEngineFactory.Scenario;
import org.mstar.flink.TestRequests;
import org.mstar.model.whisper.audio.TestWavs;
import org.mstar.schemas.Audio;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.TokenEvent;

/**
 * Speech-to-text requests through the whole job on a Flink MiniCluster between topics of an in-process Kafka
 * broker, read back as a read_committed consumer: audio inline and by path reaches the engine intact, bad audio
 * gets one 400 each while the job keeps running, and the Whisper engine's transcripts survive a task failure
 * unchanged.
 */
class AudioRequestsITCase {
    private static final Duration TIMEOUT = Duration.ofSeconds(90);

    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    @RegisterExtension
    static final KafkaBrokerExtension KAFKA = new KafkaBrokerExtension();

    @TempDir
    Path tmp;

    @Test
    void badAudioGetsOneErrorEachWhileGoodAudioIsServedAndTheJobRunsOn() throws Exception {
        Path audioDir = Files.createDirectories(tmp.resolve("audio"));
        byte[] tone = TestWavs.tone(1.0, 440, 16_000);
        Files.write(audioDir.resolve("tone.wav"), tone);
        Path outside = Files.write(tmp.resolve("outside.wav"), tone);

        GenerateRequest inline = speech("good-inline", inline(tone));
        GenerateRequest byPath = speech("good-path", Audio.newBuilder().setPath("tone.wav").build());
        GenerateRequest other = speech("good-other", inline(TestWavs.tone(2.0, 1000, 16_000)));
        GenerateRequest text = TestRequests.request("good-text", 2);
        List<GenerateRequest> good = List.of(inline, byPath, other, text);
        List<GenerateRequest> bad = new ArrayList<>(List.of(
                speech("bad-not-wav", inline("RIFF, but only the word".getBytes())),
                speech("bad-rate", inline(TestWavs.tone(1.0, 440, 44_100))),
                speech("bad-empty", inline(TestWavs.pcm16(new float[0], 16_000))),
                speech("bad-too-long", inline(TestWavs.tone(6.0, 440, 16_000))),
                speech("bad-missing-file", Audio.newBuilder().setPath("missing.wav").build()),
                speech("bad-outside", Audio.newBuilder().setPath(outside.toString()).build()),
                speech("bad-task", Audio.newBuilder(inline(tone)).setTask("summarise").build())));
        GenerateRequest withPrompt = speech("bad-prompt-too", inline(tone));
        withPrompt.setPrompt("and a prompt");
        bad.add(withPrompt);
        Job job = new Job("audio-bad", new FakeEngineFactory(2, Duration.ZERO));
        List<GenerateRequest> all = new ArrayList<>();
        for (int i = 0; i < bad.size(); i++) {
            all.add(bad.get(i));
            if (i % 2 == 0 && i / 2 < good.size()) {
                all.add(good.get(i / 2));
            }
        }
        KAFKA.kafka().produce(job.requests, all);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        conf.set(GenerateOptions.AUDIO_DIR, audioDir.toString());
        conf.set(GenerateOptions.AUDIO_MAX_DURATION, Duration.ofSeconds(5));
        JobClient client = job.start(conf, 1);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() >= good.size() && c.errors.size() >= bad.size(), TIMEOUT);
        JobStatus status = client.getJobStatus().get();
        cancel(client);

        assertThat(status).isEqualTo(JobStatus.RUNNING);
        assertThat(out.errors).extracting(ErrorEvent::getRequestId)
                .containsExactlyInAnyOrderElementsOf(bad.stream().map(GenerateRequest::getRequestId).toList());
        assertThat(out.errors).allSatisfy(e -> assertThat(e.getCode()).isEqualTo(400));
        assertThat(message(out, "bad-rate")).contains("audio.wav: sample rate is 44100 Hz");
        assertThat(message(out, "bad-too-long")).contains("audio.wav: audio of 6.0 s is longer than mstar.audio.max-duration");
        assertThat(message(out, "bad-outside")).contains("is outside mstar.audio.dir");
        out.assertComplete(List.of(inline, other, text));
        // the same file and seed by path: the fake engine's tokens hash every sample, so they match only if the
        // job read exactly the audio that was sent inline
        assertThat(tokenIds(out, "good-path")).isEqualTo(tokenIds(out, "good-inline"));
        assertThat(tokenIds(out, "good-other")).isNotEqualTo(tokenIds(out, "good-inline"));
    }

    @Test
    void sendTranscribesWavFilesThroughTheJobAndFailsOnBadAudio() throws Exception {
        Path audioDir = Files.createDirectories(tmp.resolve("send-audio"));
        Files.write(audioDir.resolve("far.wav"), TestWavs.tone(0.5, 300, 16_000));
        Path near = Files.write(tmp.resolve("near.wav"), TestWavs.tone(0.7, 600, 16_000));
        Path cd = Files.write(tmp.resolve("cd.wav"), TestWavs.tone(0.2, 600, 44_100));
        Job job = new Job("audio-send", new FakeEngineFactory(2, Duration.ZERO));
        Configuration conf = job.config();
        conf.set(GenerateOptions.AUDIO_DIR, audioDir.toString());
        JobClient client = job.start(conf, 1);
        try {
            StringWriter out = new StringWriter();
            StringWriter err = new StringWriter();
            int code = send(out, err, job, "--audio", near.toString(), "--audio-path", "far.wav", "--max-tokens", "5",
                    "--language", "en");
            assertThat(code).as("exit code; stderr:%n%s", err).isZero();
            assertThat(err.toString().lines().filter(l -> l.contains("finish=")).count())
                    .isEqualTo(2);
            assertThat(out.toString().lines().filter(l -> l.startsWith("[")).count()).isEqualTo(2);

            StringWriter badErr = new StringWriter();
            assertThat(send(new StringWriter(), badErr, job, "--audio", cd.toString())).isEqualTo(1);
            assertThat(badErr.toString()).contains("error 400: audio.wav: sample rate is 44100 Hz");
        } finally {
            cancel(client);
        }
    }

    /**
     * The Whisper engine on the tiny random-weight checkpoint, chosen by the default engine factory from the model
     * folder: a task failure injected while every request is mid-transcription, and the committed output equals an
     * uninterrupted run's, token for token.
     */
    @Test
    void whisperTranscriptsAfterAFailureMidTranscriptionEqualAnUninterruptedRun() throws Exception {
        Path model = TinyWhisper.copyTo(tmp.resolve("tiny-whisper"));
        byte[] tone = TinyWhisper.clipWav("tone", tmp.resolve("scratch"));
        byte[] noise = TinyWhisper.clipWav("noise", tmp.resolve("scratch"));
        Configuration engineConf = new Configuration();
        engineConf.set(GenerateOptions.MODEL_DIR, model.toString());
        engineConf.set(LlamaEngineOptions.MAX_BATCH_ROWS, 4);
        EngineFactory whisper = new LlamaEngineFactory(engineConf);
        GenerateRequest sampled = transcription("whisper-sampled", Audio.newBuilder(inline(tone)).setLanguage("en").build());
        sampled.setTemperature(0.9);
        sampled.setSeed(3L);
        List<GenerateRequest> requests = List.of(
                transcription("whisper-en", Audio.newBuilder(inline(tone)).setLanguage("en").build()),
                transcription("whisper-detect", inline(noise)),
                transcription("whisper-de-timestamps", Audio.newBuilder(inline(tone)).setLanguage("de")
                        .setTask("translate").setTimestamps(true).build()),
                sampled);
        Map<String, List<Integer>> expected;
        try (GenerationEngine reference = whisper.create("cpu", 0)) { // a text model would refuse the audio
            expected = TestRequests.reference(requests, reference);
        }
        Job job = new Job("whisper", new ScenarioEngineFactory("whisper", whisper));
        Scenario scenario = Scenario.start(job.name);
        scenario.pauseAfterTokens(20);
        KAFKA.kafka().produce(job.requests, requests);

        Configuration conf = job.config();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofMillis(100));
        JobClient client = job.start(conf, 1);
        // once every token before the pause is committed, a checkpoint holds the requests mid-transcription
        long generated = scenario.awaitPausedByTokens(TIMEOUT);
        TestRequests.Collected beforeFailure = KAFKA.kafka().readUntil(job.responses,
                c -> c.tokenCount() >= generated || !c.errors.isEmpty(), TIMEOUT);
        assertThat(beforeFailure.errors).isEmpty();
        scenario.failNextStep();
        scenario.unpause();
        scenario.awaitFailures(1, TIMEOUT);
        TestRequests.Collected out = KAFKA.kafka().readUntil(job.responses,
                c -> c.resultCount() + c.errors.size() >= requests.size(), TIMEOUT);
        cancel(client);

        assertThat(out.errors).isEmpty();
        out.assertComplete(requests, expected);
        assertThat(scenario.resumedMidGeneration()).as("requests resumed from a checkpoint mid-transcription")
                .isPositive();
        assertThat(expected.values()).allSatisfy(tokens -> assertThat(tokens).hasSizeGreaterThan(5));
        assertThat(out.results.get("whisper-en").get(0).getText()).isNotBlank();
    }

    private static GenerateRequest transcription(String id, Audio audio) {
        return GenerateRequest.newBuilder().setRequestId(id).setAudio(audio).setMaxTokens(16)
                .setMetadata(Map.of("clip", id)).build();
    }

    private static int send(StringWriter out, StringWriter err, Job job, String... args) {
        List<String> all = new ArrayList<>(List.of("send", "--bootstrap-servers", KAFKA.broker().bootstrapServers(),
                "--requests-topic", job.requests, "--responses-topic", job.responses, "--timeout", "60"));
        all.addAll(List.of(args));
        return Mstar.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err))
                .execute(all.toArray(String[]::new));
    }

    private static String message(TestRequests.Collected out, String id) {
        return out.errors.stream().filter(e -> e.getRequestId().equals(id)).findFirst().orElseThrow().getMessage();
    }

    private static List<Integer> tokenIds(TestRequests.Collected out, String id) {
        return out.tokens.get(id).stream().map(TokenEvent::getTokenId).toList();
    }

    /** A greedy request with a fixed seed, so that two requests for the same audio give the same tokens. */
    private static GenerateRequest speech(String id, Audio audio) {
        return GenerateRequest.newBuilder().setRequestId(id).setAudio(audio).setMaxTokens(12).setSeed(5L)
                .setIgnoreEos(true).setMetadata(Map.of("kind", "speech")).build();
    }

    private static Audio inline(byte[] wav) {
        return Audio.newBuilder().setWav(ByteBuffer.wrap(wav)).build();
    }


    /** One test's topics, transactional ids and engine. */
    private final class Job {
        final String name;
        final String requests;
        final String responses;
        final EngineFactory engine;

        Job(String name, EngineFactory engine) throws Exception {
            this.name = name;
            this.requests = name + "-requests";
            this.responses = name + "-responses";
            this.engine = engine;
            KAFKA.broker().createTopics(2, requests, responses);
        }

        Configuration config() {
            Configuration conf = new Configuration();
            conf.set(StateBackendOptions.STATE_BACKEND, "rocksdb");
            conf.set(CheckpointingOptions.INCREMENTAL_CHECKPOINTS, true);
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
            conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(100));
            conf.set(GenerateOptions.DEVICE, "cpu");
            return conf;
        }

        JobClient start(Configuration conf, int parallelism) throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
            env.setParallelism(parallelism);
            GenerationPipeline.builder()
                    .configure(conf)
                    .bootstrapServers(KAFKA.broker().bootstrapServers())
                    .requestsTopic(requests)
                    .responsesTopic(responses)
                    .groupId(name)
                    .transactionalIdPrefix("tx-" + name)
                    .engineFactory(engine)
                    .build()
                    .addTo(env);
            return env.executeAsync("mstar " + name);
        }
    }
}
