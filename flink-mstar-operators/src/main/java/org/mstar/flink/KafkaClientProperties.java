package org.mstar.flink;

import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.provider.DirectoryConfigProvider;
import org.apache.kafka.common.config.provider.EnvVarConfigProvider;
import org.apache.kafka.common.config.provider.FileConfigProvider;

/**
 * The Kafka client properties of a job's consumer, producers and admin clients (security, {@code client.id}, quotas,
 * timeouts), named as Kafka names them. In a job's configuration they are the keys {@code mstar.kafka.<property>}
 * whose property has no '-': Kafka's names never have one, the options of {@link KafkaIoOptions} always do.
 *
 * <p>Secrets stay out of the configuration with Kafka's own config providers, which the clients resolve where they
 * run: {@code ${file:PATH:KEY}} (a key of a properties file), {@code ${dir:DIR:FILE}} (a file's content, as a
 * mounted Kubernetes secret holds it) and {@code ${env:NAME}}. {@link #withConfigProviders} declares these three
 * unless {@code config.providers} is set. {@link #describe} shows properties with literal secrets hidden.
 *
 * <p>No Flink class is used here, so the command-line clients load it without Flink on the class path.
 */
@PublicEvolving
public final class KafkaClientProperties {
    /** What precedes a Kafka client property's name in a job's configuration. */
    public static final String PREFIX = "mstar.kafka.";

    private static final Map<String, String> PROVIDERS = Map.of(
            "file", FileConfigProvider.class.getName(),
            "dir", DirectoryConfigProvider.class.getName(),
            "env", EnvVarConfigProvider.class.getName());

    /** A value that is only a reference to a config provider: showing it shows no secret. */
    private static final Pattern REFERENCE = Pattern.compile("\\$\\{[^}]*}");

    /** Names of properties that are not Kafka's but may carry a secret (a plug-in's own settings). */
    private static final Pattern SECRET_NAME = Pattern.compile("(?i).*(password|secret|jaas|token|credential|key$).*");

    private static final Set<String> PASSWORD_TYPED = Stream.of(ProducerConfig.configDef(), ConsumerConfig.configDef(),
                    AdminClientConfig.configDef())
            .flatMap(d -> d.configKeys().values().stream())
            .filter(k -> k.type == ConfigDef.Type.PASSWORD)
            .map(k -> k.name)
            .collect(Collectors.toUnmodifiableSet());

    private KafkaClientProperties() {}

    /** The Kafka client properties among {@code config}'s keys, without their prefix. */
    public static Properties from(Map<String, String> config) {
        Properties p = new Properties();
        config.forEach((key, value) -> {
            if (isPropertyKey(key)) {
                p.setProperty(key.substring(PREFIX.length()), value);
            }
        });
        return p;
    }

    /** Whether the configuration key {@code key} names a Kafka client property (rather than an mstar option). */
    public static boolean isPropertyKey(String key) {
        return key.startsWith(PREFIX) && key.length() > PREFIX.length() && key.indexOf('-', PREFIX.length()) < 0;
    }

    /**
     * A copy of {@code properties} that declares Kafka's file, dir and env config providers when it uses a
     * reference and declares none itself ({@value AbstractConfig#CONFIG_PROVIDERS_CONFIG} unset).
     */
    public static Properties withConfigProviders(Properties properties) {
        Properties p = new Properties();
        p.putAll(properties);
        boolean refers = p.values().stream().anyMatch(v -> REFERENCE.matcher(v.toString()).find());
        if (refers && !p.containsKey(AbstractConfig.CONFIG_PROVIDERS_CONFIG)) {
            p.setProperty(AbstractConfig.CONFIG_PROVIDERS_CONFIG, String.join(",", new TreeMap<>(PROVIDERS).keySet()));
            PROVIDERS.forEach((name, type) ->
                    p.setProperty(AbstractConfig.CONFIG_PROVIDERS_CONFIG + "." + name + ".class", type));
        }
        return p;
    }

    /**
     * {@code key=value, ...} in key order, for a line a person reads: the value of a secret (a password-typed Kafka
     * property, or a name that says so) shows as {@code (hidden)} unless it is only a provider reference.
     */
    public static String describe(Properties properties) {
        return new TreeMap<>(properties).entrySet().stream()
                .map(e -> e.getKey() + "=" + shown(e.getKey().toString(), e.getValue().toString()))
                .collect(Collectors.joining(", "));
    }

    /** Whether the value of {@code name} is a secret. */
    static boolean isSecret(String name) {
        return PASSWORD_TYPED.contains(name) || SECRET_NAME.matcher(name).matches();
    }

    private static String shown(String name, String value) {
        return isSecret(name) && !REFERENCE.matcher(value).matches() ? "(hidden)" : value;
    }
}
