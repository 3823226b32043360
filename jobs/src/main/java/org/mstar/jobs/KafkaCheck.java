package org.mstar.jobs;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.mstar.flink.KafkaClientProperties;

/**
 * What the commands check before they talk to Kafka, so that a broker that is not there, or a topic that is
 * missing, ends the command with one sentence instead of client warnings repeated until some timeout (or, for a
 * job, a failover loop).
 */
final class KafkaCheck {
    /** How long a broker gets to answer. */
    static final Duration TIMEOUT = Duration.ofSeconds(30);

    private KafkaCheck() {}

    /** Kafka cannot be used as asked; the message says why and what to do. */
    static final class KafkaUnavailable extends Exception {
        KafkaUnavailable(String message) {
            super(message);
        }
    }

    /**
     * Waits up to {@link #TIMEOUT} for the cluster at {@code bootstrapServers} to answer, then makes sure each of
     * {@code topics} exists: with {@code create}, by creating the missing ones ({@code partitions} each, replicated
     * as the broker's default says), otherwise by naming them.
     *
     * @throws KafkaUnavailable no answer in time, a missing topic, or one that could not be created
     */
    static void topics(String bootstrapServers, List<String> topics, boolean create, int partitions)
            throws KafkaUnavailable, InterruptedException {
        topics(bootstrapServers, new Properties(), topics, create, partitions, TIMEOUT);
    }

    /** {@link #topics(String, List, boolean, int)} with another timeout than {@link #TIMEOUT}. */
    static void topics(String bootstrapServers, List<String> topics, boolean create, int partitions, Duration timeout)
            throws KafkaUnavailable, InterruptedException {
        topics(bootstrapServers, new Properties(), topics, create, partitions, timeout);
    }

    /**
     * {@link #topics(String, List, boolean, int)} through a client with these Kafka client properties (security and
     * the like, see {@link KafkaClientProperties}); credentials the cluster refuses end it at once.
     */
    static void topics(String bootstrapServers, Properties client, List<String> topics, boolean create, int partitions,
            Duration timeout) throws KafkaUnavailable, InterruptedException {
        int timeoutMs = (int) timeout.toMillis();
        try (Admin admin = admin(bootstrapServers, client, timeoutMs)) {
            Set<String> existing;
            try {
                existing = admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                throw refusedOrSilent(bootstrapServers, e.getCause(), timeout);
            } catch (TimeoutException e) {
                throw refusedOrSilent(bootstrapServers, e, timeout);
            }
            List<String> missing = topics.stream().distinct().filter(t -> !existing.contains(t)).toList();
            if (missing.isEmpty()) {
                return;
            }
            if (!create) {
                throw new KafkaUnavailable("Kafka at " + bootstrapServers + " has no topic " + String.join(", ", missing)
                        + ". `mstar serve` creates its topics when it starts: start it first, with the same topic names.");
            }
            List<NewTopic> created = new ArrayList<>();
            for (String t : missing) {
                created.add(new NewTopic(t, Optional.of(partitions), Optional.empty()));
            }
            try {
                admin.createTopics(created).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) { // created meanwhile by someone else: fine
                    throw new KafkaUnavailable("Kafka at " + bootstrapServers + " has no topic "
                            + String.join(", ", missing) + " and creating it failed: " + e.getCause().getMessage()
                            + ". Create it, or name an existing one with --requests-topic / --responses-topic.");
                }
            } catch (TimeoutException e) {
                throw new KafkaUnavailable("Creating topic " + String.join(", ", missing) + " at " + bootstrapServers
                        + " took longer than " + timeout.toSeconds() + " s.");
            }
        }
    }

    /** Why the cluster did not answer: it refused the credentials or the TLS handshake, or nothing answered. */
    private static KafkaUnavailable refusedOrSilent(String bootstrapServers, Throwable cause, Duration timeout) {
        if (cause instanceof SslAuthenticationException) {
            return new KafkaUnavailable("The TLS handshake with Kafka at " + bootstrapServers + " failed: "
                    + rootMessage(cause) + ". Check ssl.truststore.* in --kafka-properties.");
        }
        if (cause instanceof AuthenticationException) {
            return new KafkaUnavailable("Kafka at " + bootstrapServers + " refused the credentials: "
                    + rootMessage(cause) + ". Check sasl.mechanism and sasl.jaas.config in --kafka-properties.");
        }
        return new KafkaUnavailable("No Kafka broker answered at " + bootstrapServers + " within "
                + timeout.toSeconds() + " s. Start one with `mstar kafka` in another terminal, or give"
                + " --bootstrap-servers of a running cluster (and, if it needs TLS or SASL, --kafka-properties).");
    }

    /** The innermost cause's message, without a final full stop (the caller's sentence goes on). */
    private static String rootMessage(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String message = String.valueOf(root.getMessage()).strip();
        return message.endsWith(".") ? message.substring(0, message.length() - 1) : message;
    }

    private static Admin admin(String bootstrapServers, Properties client, int timeoutMs) throws KafkaUnavailable {
        Properties p = KafkaClientProperties.withConfigProviders(client);
        p.putAll(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs,
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs));
        try {
            return Admin.create(p);
        } catch (KafkaException e) { // such as a host name that does not resolve, or a secret that cannot be read
            throw new KafkaUnavailable("Cannot use Kafka at " + bootstrapServers + ": " + rootMessage(e) + ".");
        }
    }
}
