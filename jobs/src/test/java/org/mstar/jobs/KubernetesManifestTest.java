package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.networknt.schema.Error;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.junit.jupiter.api.Test;
import org.mstar.flink.GenerateOptions;
import picocli.CommandLine;

/**
 * deploy/kubernetes/mstar-serve.yaml, the FlinkDeployment of the Kubernetes guide: its job arguments are a command
 * line {@code serve} accepts and agree with the deployment's GPU, parallelism and state settings; its job jar is
 * where docker/Dockerfile puts it; and it matches the schema of the Flink Kubernetes Operator's FlinkDeployment CRD,
 * with a field the schema does not declare counted as an error: the API server would drop it without a word. The CRD
 * is the one the operator's API jar ships (the build unpacks it into target/k8s); {@code -Dmstar.k8s.crd=FILE} checks
 * against another, e.g. the one a cluster has installed ({@code kubectl get crd flinkdeployments.flink.apache.org
 * -o yaml}).
 */
class KubernetesManifestTest {
    private static final Path MANIFEST = Path.of("..", "deploy", "kubernetes", "mstar-serve.yaml");
    private static final Path DOCKERFILE = Path.of("..", "docker", "Dockerfile");
    private static final Path CRD = Path.of(System.getProperty("mstar.k8s.crd",
            "target/k8s/META-INF/fabric8/flinkdeployments.flink.apache.org-v1.yml"));
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

    @Test
    void theJobArgumentsAreAServeCommandLineThatAgreesWithTheDeployment() throws IOException {
        JsonNode spec = YAML.readTree(MANIFEST.toFile()).path("spec");
        List<String> args = new ArrayList<>();
        spec.path("job").path("args").forEach(a -> args.add(a.asText()));
        assertThat(spec.path("job").path("entryClass").asText()).isEqualTo(Mstar.class.getName());

        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs(args.toArray(String[]::new));
        ServeCommand serve = (ServeCommand) parsed.subcommand().commandSpec().userObject();
        Configuration conf = Configuration.fromMap(serve.options); // its -D options; the file is read in the pod
        JsonNode flink = spec.path("flinkConfiguration");

        int slots = Integer.parseInt(flink.path("taskmanager.numberOfTaskSlots").asText());
        assertThat(serve.parallelism).as("one generate subtask per GPU")
                .isEqualTo(spec.path("job").path("parallelism").asInt())
                .isEqualTo(spec.path("taskManager").path("replicas").asInt() * slots);
        assertThat(flink.path("external-resource.gpu.amount").asText()).isEqualTo("1");
        assertThat(flink.path("external-resources").asText()).isEqualTo(conf.get(GenerateOptions.GPU_RESOURCE));
        assertThat(flink.path("external-resource.gpu.kubernetes.config-key").asText()).isEqualTo("nvidia.com/gpu");
        assertThat(serve.device).isEqualTo("auto");
        assertThat(serve.stateDir).startsWith("s3://");
        assertThat(flink.path("high-availability.type").asText()).isEqualTo("kubernetes");
        assertThat(flink.path("high-availability.storageDir").asText()).startsWith("s3://");
        assertThat(mountPaths(spec)).as("--kafka-properties is in a mounted folder")
                .anyMatch(m -> serve.kafkaClient.file.startsWith(m));
    }

    @Test
    void theJobJarIsWhereDockerfilePutsIt() throws IOException {
        String jarUri = YAML.readTree(MANIFEST.toFile()).path("spec").path("job").path("jarURI").asText();
        assertThat(Files.readAllLines(DOCKERFILE)).filteredOn(line -> line.startsWith("COPY ")).singleElement()
                .satisfies(copy -> assertThat(jarUri).isEqualTo("local://" + copy.replaceAll(".* ", "")));
    }

    @Test
    void theFlinkDeploymentMatchesTheOperatorsSchema() throws IOException {
        JsonNode manifest = YAML.readTree(MANIFEST.toFile());
        assertThat(manifest.path("spec").path("flinkVersion").asText()).isEqualTo(builtFlinkVersion());
        assertThat(errors(manifest)).isEmpty();
    }

    /** What the check above would miss if it let undeclared fields, wrong types or unknown versions through. */
    @Test
    void aMisspeltFieldAWrongTypeAndAnUnknownFlinkVersionAreErrors() throws IOException {
        ObjectNode manifest = (ObjectNode) YAML.readTree(MANIFEST.toFile());
        ObjectNode spec = (ObjectNode) manifest.path("spec");
        ObjectNode taskManager = (ObjectNode) spec.path("taskManager");
        taskManager.set("replica", taskManager.remove("replicas"));
        ((ObjectNode) spec.path("job")).put("parallelism", "two");
        spec.put("flinkVersion", "v2_9");
        ObjectNode container = (ObjectNode) spec.path("podTemplate").path("spec").path("containers").get(0);
        container.set("volumeMount", container.remove("volumeMounts")); // the pod template is checked as a Pod
        assertThat(errors(manifest)).hasSize(4)
                .anyMatch(e -> e.contains("replica"))
                .anyMatch(e -> e.contains("volumeMount"))
                .anyMatch(e -> e.startsWith("/spec/job/parallelism"))
                .anyMatch(e -> e.startsWith("/spec/flinkVersion"));
    }

    private static List<String> errors(JsonNode manifest) throws IOException {
        JsonNode crd = YAML.readTree(CRD.toFile());
        JsonNode schema = null;
        for (JsonNode version : crd.path("spec").path("versions")) {
            if (version.path("name").asText().equals(manifest.path("apiVersion").asText().replaceAll(".*/", ""))) {
                schema = version.path("schema").path("openAPIV3Schema");
            }
        }
        assertThat(schema).as("%s in %s", manifest.path("apiVersion"), CRD).isNotNull();
        ObjectNode checked = schema.deepCopy();
        // The newest API jar the build can resolve (1.10.0) predates Flink 2, whose versions later operators added to
        // this enum: it gains the one the job is built with, and every other value is still refused.
        ArrayNode versions = (ArrayNode) checked.path("properties").path("spec").path("properties")
                .path("flinkVersion").path("enum");
        List<String> listed = new ArrayList<>();
        versions.forEach(v -> listed.add(v.asText()));
        if (!listed.contains(builtFlinkVersion())) {
            versions.add(builtFlinkVersion());
        }
        checked.path("properties").forEach(KubernetesManifestTest::closed); // apiVersion, kind, metadata: the API's
        Schema closed = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_4).getSchema(checked);
        return closed.validate(manifest).stream().map(Error::toString).toList();
    }

    /**
     * The schema with every object that declares properties closed to others (unless it preserves unknown fields or
     * says what others may be), as the API server prunes them: here they are errors instead.
     */
    private static JsonNode closed(JsonNode schema) {
        if (schema instanceof ObjectNode node) {
            if (node.has("properties") && !node.has("additionalProperties")
                    && !node.path("x-kubernetes-preserve-unknown-fields").asBoolean(false)) {
                node.put("additionalProperties", false);
            }
            node.forEach(KubernetesManifestTest::closed);
        } else if (schema.isArray()) {
            schema.forEach(KubernetesManifestTest::closed);
        }
        return schema;
    }

    /** The operator's name for the Flink the job is built with: v2_2 for 2.2.1. */
    private static String builtFlinkVersion() {
        String[] version = EnvironmentInformation.getVersion().split("\\.");
        return "v" + version[0] + "_" + version[1];
    }

    private static List<Path> mountPaths(JsonNode spec) {
        List<Path> out = new ArrayList<>();
        for (JsonNode container : spec.path("podTemplate").path("spec").path("containers")) {
            container.path("volumeMounts").forEach(m -> out.add(Path.of(m.path("mountPath").asText())));
        }
        return out;
    }
}
