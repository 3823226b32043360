package org.mstar.jobs;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * An in-process broker with a SASL_SSL listener, as a managed Kafka offers one: TLS with a throwaway self-signed
 * certificate (for 127.0.0.1, made by the JDK's keytool) and SCRAM-SHA-512 with one user. Its PLAINTEXT listener
 * stays for the broker itself and for creating topics.
 */
final class SaslSslKafka implements AutoCloseable {
    static final String USER = "mstar-job";
    static final String MECHANISM = "SCRAM-SHA-512";

    private final EmbeddedKafkaBroker broker;
    private final String secureServers;
    private final Path truststore;
    private final String truststorePassword;
    private final String password;

    private SaslSslKafka(EmbeddedKafkaBroker broker, int securePort, Path truststore, String truststorePassword,
            String password) {
        this.broker = broker;
        this.secureServers = "127.0.0.1:" + securePort;
        this.truststore = truststore;
        this.truststorePassword = truststorePassword;
        this.password = password;
    }

    /** Makes the certificate and the user's password in {@code dir}, then starts the broker. */
    static SaslSslKafka start(Path dir) throws Exception {
        String storePassword = "store-" + System.nanoTime();
        String password = "scram-" + System.nanoTime();
        Path keystore = dir.resolve("broker.p12");
        keytool("-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1", "-validity", "2",
                "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1", "-storetype", "PKCS12",
                "-keystore", keystore.toString(), "-storepass", storePassword, "-keypass", storePassword);
        Path truststore = dir.resolve("truststore.p12");
        trustOnly(keystore, storePassword, truststore);

        int port = EmbeddedKafkaBroker.freePort();
        String prefix = "listener.name.secure.";
        EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start(new EmbeddedKafkaBroker.Listener("SECURE", "SASL_SSL",
                port, Map.of(
                        "sasl.enabled.mechanisms", MECHANISM,
                        prefix + MECHANISM.toLowerCase() + ".sasl.jaas.config",
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                        prefix + "ssl.keystore.type", "PKCS12",
                        prefix + "ssl.keystore.location", keystore.toString(),
                        prefix + "ssl.keystore.password", storePassword,
                        prefix + "ssl.key.password", storePassword),
                List.of("--add-scram", MECHANISM + "=[name=" + USER + ",password=" + password + "]")));
        return new SaslSslKafka(broker, port, truststore, storePassword, password);
    }

    /** host:port of the SASL_SSL listener. */
    String secureServers() {
        return secureServers;
    }

    EmbeddedKafkaBroker broker() {
        return broker;
    }

    /**
     * Writes what a user of this cluster writes: a client.properties file that refers to its secrets, the JAAS line
     * in a properties file ({@code ${file:..}}) and the truststore password alone in a file of a secrets folder
     * ({@code ${dir:..}}, as a mounted Kubernetes secret holds it).
     *
     * @param password the SCRAM password to use, right or wrong
     * @return the client.properties file
     */
    Path clientProperties(Path dir, String password) throws IOException {
        Path secrets = Files.createDirectories(dir.resolve("secrets"));
        Files.writeString(secrets.resolve("truststore-password"), truststorePassword);
        Path jaas = dir.resolve("jaas.properties");
        Files.writeString(jaas, "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required"
                + " username=\"" + USER + "\" password=\"" + password + "\";\n");
        Path file = dir.resolve("client.properties");
        Files.writeString(file, String.join("\n",
                "security.protocol=SASL_SSL",
                "sasl.mechanism=" + MECHANISM,
                "sasl.jaas.config=${file:" + jaas + ":sasl.jaas.config}",
                "ssl.truststore.type=PKCS12",
                "ssl.truststore.location=" + truststore,
                "ssl.truststore.password=${dir:" + secrets + ":truststore-password}",
                ""));
        return file;
    }

    /** The user's password. */
    String password() {
        return password;
    }

    @Override
    public void close() throws IOException {
        broker.close();
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        List<String> command = new java.util.ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("keytool " + String.join(" ", args) + " failed: " + output);
        }
    }

    /** A truststore holding only the certificate of {@code keystore}'s key, as a client gets it. */
    private static void trustOnly(Path keystore, String password, Path truststore) throws Exception {
        KeyStore keys = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(keystore)) {
            keys.load(in, password.toCharArray());
        }
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        trust.setCertificateEntry("broker", keys.getCertificate("broker"));
        try (OutputStream out = Files.newOutputStream(truststore)) {
            trust.store(out, password.toCharArray());
        }
    }
}
