package org.mstar.jobs;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * An in-process Kafka broker for the tests of one class: started before the first test, closed after the last.
 * Register it as a static field with {@code @RegisterExtension}.
 */
final class KafkaBrokerExtension implements BeforeAllCallback, AfterAllCallback {
    private EmbeddedKafkaBroker broker;
    private KafkaTestSupport kafka;

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        broker = EmbeddedKafkaBroker.start();
        kafka = new KafkaTestSupport(broker.bootstrapServers());
    }

    @Override
    public void afterAll(ExtensionContext context) throws Exception {
        broker.close();
    }

    EmbeddedKafkaBroker broker() {
        return broker;
    }

    /** Produces to and reads committed records from the broker. */
    KafkaTestSupport kafka() {
        return kafka;
    }
}
