package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.junit.jupiter.api.Test;

class KafkaClientPropertiesTest {
    @Test
    void theKeysWithoutAHyphenAreKafkaPropertiesTheOthersMstarOptions() {
        Properties p = KafkaClientProperties.from(Map.of(
                "mstar.kafka.security.protocol", "SASL_SSL",
                "mstar.kafka.client.id", "me",
                "mstar.kafka.bootstrap-servers", "k:9092",
                "mstar.engine.max-waiting", "3",
                "security.protocol", "SSL"));
        assertThat(p).containsOnly(Map.entry("security.protocol", "SASL_SSL"), Map.entry("client.id", "me"));
    }

    /** What the rule above rests on: Kafka's client properties never have a '-', mstar's Kafka options always. */
    @Test
    void noKafkaClientPropertyHasAHyphenAndEveryKafkaIoOptionHasOne() {
        assertThat(Stream.of(ProducerConfig.configNames(), ConsumerConfig.configNames(),
                AdminClientConfig.configNames()).flatMap(names -> names.stream()).filter(n -> n.contains("-"))).isEmpty();
        assertThat(KafkaIoOptions.keys()).hasSize(8)
                .allMatch(k -> k.startsWith(KafkaClientProperties.PREFIX) && !KafkaClientProperties.isPropertyKey(k));
    }

    @Test
    void describeHidesLiteralSecretsAndShowsReferencesToThem() {
        Properties p = new Properties();
        p.setProperty("security.protocol", "SASL_SSL");
        p.setProperty("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required"
                + " username=\"u\" password=\"hunter2\";");
        p.setProperty("ssl.truststore.password", "${dir:/run/secrets:truststore-password}");
        p.setProperty("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----");
        p.setProperty("some.plugin.api.secret", "s3cr3t");
        assertThat(KafkaClientProperties.describe(p)).isEqualTo("sasl.jaas.config=(hidden), security.protocol=SASL_SSL,"
                + " some.plugin.api.secret=(hidden), ssl.keystore.key=(hidden),"
                + " ssl.truststore.password=${dir:/run/secrets:truststore-password}");
    }

    @Test
    void referencesGetKafkasProvidersDeclaredAndKafkaResolvesThem() {
        Map.Entry<String, String> variable = System.getenv().entrySet().stream()
                .filter(e -> !e.getValue().isEmpty() && e.getKey().matches("[A-Z_]+")).findFirst().orElseThrow();
        Properties given = new Properties();
        given.setProperty("client.id", "${env:" + variable.getKey() + "}");
        Properties declared = KafkaClientProperties.withConfigProviders(given);
        assertThat(declared.getProperty("config.providers")).isEqualTo("dir,env,file");

        AbstractConfig resolved = new AbstractConfig(new ConfigDef().define("client.id", ConfigDef.Type.STRING,
                ConfigDef.Importance.HIGH, "id"), declared);
        assertThat(resolved.getString("client.id")).isEqualTo(variable.getValue());
    }

    @Test
    void providersTheUserDeclaresAreLeftAsTheyAre() {
        Properties given = new Properties();
        given.setProperty("config.providers", "vault");
        given.setProperty("sasl.jaas.config", "${vault:kafka/creds:jaas}");
        assertThat(KafkaClientProperties.withConfigProviders(given)).isEqualTo(given);
        Properties plain = new Properties();
        plain.setProperty("client.id", "me");
        assertThat(KafkaClientProperties.withConfigProviders(plain)).isEqualTo(plain);
    }

    @Test
    void theBuilderTakesKafkaPropertiesFromItsConfigurationAndNamesAMistypedOption() {
        Configuration conf = Configuration.fromMap(Map.of("mstar.kafka.bootstrap-servers", "k:9092",
                "mstar.kafka.transactional-id-prefx", "x"));
        assertThatThrownBy(() -> GenerationPipeline.builder().configure(conf).engineFactory(new FakeEngineFactory(conf))
                .transactionalIdPrefix("tx").build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("Unknown option 'mstar.kafka.transactional-id-prefx'")
                .hasMessageContaining("mstar.kafka.transactional-id-prefix");
    }
}
