package org.mstar.jobs;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.mstar.flink.KafkaClientProperties;
import picocli.CommandLine.Option;

/**
 * How the commands' Kafka clients connect (TLS, SASL, client.id, ...): a properties file as Kafka's own tools take
 * ({@code --command-config}) and managed services hand out, and {@code -Dmstar.kafka.<property>=VALUE}, which wins.
 * Shared by the commands; no Flink class is used, so {@code send} runs without Flink on the class path.
 */
final class KafkaClientFlags {
    @Option(names = "--kafka-properties", paramLabel = "FILE",
            description = "Kafka client properties (security.protocol, sasl.*, ssl.*, client.id, ...), as in Kafka's"
                    + " client.properties. Secrets are best referenced, not written: ${file:PATH:KEY},"
                    + " ${dir:DIR:FILE}, ${env:NAME}. -Dmstar.kafka.<property>=VALUE sets one and wins.")
    Path file;

    /**
     * The file's properties, then each {@code mstar.kafka.<property>} among {@code options} over them.
     *
     * @throws IllegalArgumentException the file cannot be read
     */
    Properties properties(Map<String, String> options) {
        Properties p = new Properties();
        if (file != null) {
            try (Reader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
                p.load(in);
            } catch (IOException e) {
                throw new IllegalArgumentException("--kafka-properties " + file + " cannot be read: " + e.getMessage());
            }
        }
        p.putAll(KafkaClientProperties.from(options));
        return p;
    }

    /**
     * {@code options} with the file's properties added as {@code mstar.kafka.<property>} where {@code options} sets
     * none: the job's configuration.
     */
    Map<String, String> addTo(Map<String, String> options) {
        Map<String, String> all = new HashMap<>(options);
        properties(Map.of()).forEach((k, v) -> all.putIfAbsent(KafkaClientProperties.PREFIX + k, v.toString()));
        return all;
    }
}
