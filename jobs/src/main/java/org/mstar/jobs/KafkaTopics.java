package org.mstar.jobs;

import picocli.CommandLine.Option;

/**
 * Where requests go and responses come from; shared by the commands. Defaults repeat those of {@code
 * KafkaIoOptions} as literals, so that {@code send} runs from the job jar without Flink on the classpath.
 */
final class KafkaTopics {
    @Option(names = "--bootstrap-servers", paramLabel = "HOST:PORT[,...]",
            description = "Kafka bootstrap servers. Default: ${DEFAULT-VALUE}, where `mstar kafka` listens.")
    String bootstrapServers = "localhost:9092";

    @Option(names = "--requests-topic", paramLabel = "TOPIC", description = "Default: ${DEFAULT-VALUE}.")
    String requestsTopic = "requests";

    @Option(names = "--responses-topic", paramLabel = "TOPIC", description = "Default: ${DEFAULT-VALUE}.")
    String responsesTopic = "responses";
}
