package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.testutils.MiniClusterResourceConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.test.junit5.MiniClusterExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.flink.FakeEngineFactory;
import org.mstar.flink.GenerationPipeline;
import picocli.CommandLine;

/**
 * The job and the command line against a broker that only speaks SASL_SSL (SCRAM-SHA-512 over TLS), configured as a
 * user would: {@code --kafka-properties} with the secrets referenced through Kafka's config providers. The job
 * serves through that listener; a client without credentials gets nothing; a wrong password ends {@code send} and
 * {@code serve} at once with one line and exit code 2.
 */
class SecuredKafkaITCase {
    @RegisterExtension
    static final MiniClusterExtension FLINK = new MiniClusterExtension(new MiniClusterResourceConfiguration.Builder()
            .setNumberTaskManagers(1).setNumberSlotsPerTaskManager(2).build());

    @TempDir
    static Path dir;

    private static SaslSslKafka kafka;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    @BeforeAll
    static void startBroker() throws Exception {
        kafka = SaslSslKafka.start(dir);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        kafka.close();
    }

    @Test
    void theJobServesThroughTheSaslSslListenerAndSendReadsItsResponses() throws Exception {
        kafka.broker().createTopics(2, "sec-requests", "sec-responses");
        Path props = kafka.clientProperties(Files.createDirectories(dir.resolve("right")), kafka.password());
        String[] topics = {"--bootstrap-servers", kafka.secureServers(), "--requests-topic", "sec-requests",
                "--responses-topic", "sec-responses", "--kafka-properties", props.toString()};

        ServeCommand serve = (ServeCommand) new CommandLine(new Mstar()).parseArgs(concat(new String[] {"serve",
                "--state-dir", dir.resolve("state").toString(), "-Dmstar.kafka.client.id=mstar-secured-it"}, topics))
                .subcommand().commandSpec().userObject();
        Configuration conf = ServeJob.configuration(serve);
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(200));
        assertThat(ServeJob.runningLine(serve, conf, "fake", "rest", true))
                .contains("security.protocol=SASL_SSL", "client.id=mstar-secured-it",
                        "sasl.jaas.config=${file:")
                .doesNotContain(kafka.password());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        GenerationPipeline.builder().configure(conf).engineFactory(new FakeEngineFactory(4, Duration.ofMillis(1)))
                .build().addTo(env);
        JobClient job = env.executeAsync("mstar secured");
        try {
            int code = run(concat(new String[] {"send", "--timeout", "60", "--max-tokens", "5"},
                    concat(topics, new String[] {"one prompt", "another prompt"})));
            assertThat(code).as("send: %s", err).isZero();
            assertThat(out.toString()).isNotBlank();
        } finally {
            job.cancel().get();
        }
    }

    @Test
    void aClientWithoutCredentialsGetsNoAnswer() {
        assertThatThrownBy(() -> KafkaCheck.topics(kafka.secureServers(), new Properties(), List.of("sec-requests"),
                false, 1, Duration.ofSeconds(3)))
                .isInstanceOf(KafkaCheck.KafkaUnavailable.class)
                .hasMessageStartingWith("No Kafka broker answered at " + kafka.secureServers());
    }

    @Test
    void aWrongPasswordEndsSendAndServeWithOneLineAndExitCode2() throws Exception {
        kafka.broker().createTopics(1, "wrong-requests", "wrong-responses");
        Path props = kafka.clientProperties(Files.createDirectories(dir.resolve("wrong")), "not-the-password");
        String[] topics = {"--bootstrap-servers", kafka.secureServers(), "--requests-topic", "wrong-requests",
                "--responses-topic", "wrong-responses", "--kafka-properties", props.toString()};
        String refused = "Kafka at " + kafka.secureServers() + " refused the credentials: ";

        assertThat(run(concat(new String[] {"send", "hello"}, topics))).isEqualTo(2);
        assertThat(err.toString().strip()).startsWith(refused).contains(SaslSslKafka.MECHANISM).doesNotContain("\n");

        err.getBuffer().setLength(0);
        assertThat(run(concat(new String[] {"serve", "--engine-factory", FakeEngineFactory.class.getName(),
                "--state-dir", dir.resolve("wrong-state").toString()}, topics))).isEqualTo(2);
        assertThat(err.toString().strip()).startsWith(refused).doesNotContain("\n");
    }

    private int run(String... args) {
        CommandLine cli = Mstar.commandLine();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        return cli.execute(args);
    }

    private static String[] concat(String[] a, String[] b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
