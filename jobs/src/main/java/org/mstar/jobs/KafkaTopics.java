package org.mstar.jobs;

import org.mstar.flink.KafkaIoOptions;
import picocli.CommandLine.Option;

/** Where requests go and responses come from; shared by the commands. */
final class KafkaTopics {
    @Option(names = "--bootstrap-servers", required = true, paramLabel = "HOST:PORT[,...]",
            description = "Kafka bootstrap servers.")
    String bootstrapServers;

    @Option(names = "--requests-topic", paramLabel = "TOPIC", description = "Default: ${DEFAULT-VALUE}.")
    String requestsTopic = KafkaIoOptions.REQUESTS_TOPIC.defaultValue();

    @Option(names = "--responses-topic", paramLabel = "TOPIC", description = "Default: ${DEFAULT-VALUE}.")
    String responsesTopic = KafkaIoOptions.RESPONSES_TOPIC.defaultValue();
}
