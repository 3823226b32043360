package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The checks that turn a missing broker or topic into one sentence. */
class KafkaCheckTest {

    @Test
    void noBrokerIsOneSentenceNamingTheAddressAndWhatToDo() throws Exception {
        int closed;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            closed = s.getLocalPort();
        }
        assertThatThrownBy(() -> KafkaCheck.topics("127.0.0.1:" + closed, List.of("requests"), true, 1,
                Duration.ofSeconds(2)))
                .isInstanceOf(KafkaCheck.KafkaUnavailable.class)
                .hasMessage("No Kafka broker answered at 127.0.0.1:" + closed + " within 2 s. Start one with `mstar"
                        + " kafka` in another terminal, or give --bootstrap-servers of a running cluster (and, if it"
                        + " needs TLS or SASL, --kafka-properties).");
    }

    @Test
    void anAddressThatDoesNotResolveIsOneSentence() {
        assertThatThrownBy(() -> KafkaCheck.topics("no-such-host.invalid:9092", List.of("requests"), false, 1))
                .isInstanceOf(KafkaCheck.KafkaUnavailable.class)
                .hasMessageStartingWith("Cannot use Kafka at no-such-host.invalid:9092: ");
    }

    @Test
    void missingTopicsAreCreatedOrNamed() throws Exception {
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            assertThatThrownBy(() -> KafkaCheck.topics(broker.bootstrapServers(), List.of("in", "out"), false, 1))
                    .isInstanceOf(KafkaCheck.KafkaUnavailable.class)
                    .hasMessageContaining("has no topic in, out")
                    .hasMessageContaining("start it first");

            KafkaCheck.topics(broker.bootstrapServers(), List.of("in", "out"), true, 2);
            try (var admin = broker.admin()) {
                assertThat(admin.describeTopics(List.of("in", "out")).allTopicNames().get().values())
                        .allSatisfy(t -> assertThat(t.partitions()).hasSize(2));
            }
            KafkaCheck.topics(broker.bootstrapServers(), List.of("in", "out"), false, 1); // both there now
        }
    }
}
