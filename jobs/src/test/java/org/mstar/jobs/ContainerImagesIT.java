package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The container images that the images profile builds with Jib (jobs/pom.xml) into target/images: what their configs
 * say, what their layers hold, and the CPU image's entry point run in a root that holds the image's files and
 * nothing else, as its user. Run by that profile after the images are built ({@code mvn verify -Pimages}).
 */
class ContainerImagesIT {
    private static final Path IMAGES = Path.of("target", "images");
    private static final Path BUILT_FATBIN =
            Path.of("..", "kernels", "target", "classes", "org", "mstar", "kernels", "mstar_kernels.fatbin");
    private static final String LOADER = "/lib64/ld-linux-x86-64.so.2";
    private static final String CLASSPATH_FILE = "/opt/mstar/app/jib-classpath-file";

    private static OciImageArchive cpu;
    private static OciImageArchive cuda;

    @BeforeAll
    static void unpack(@TempDir Path dir) throws IOException {
        cpu = OciImageArchive.unpack(IMAGES.resolve("mstar-cpu.tar"), dir.resolve("cpu"));
        cuda = OciImageArchive.unpack(IMAGES.resolve("mstar-cuda.tar"), dir.resolve("cuda"));
    }

    @Test
    void theEntryPointRunsTheCommandLineOnTheImagesJavaAsAnUnprivilegedUser() {
        JsonNode config = cpu.config();
        assertThat(strings(config.path("Entrypoint"))).startsWith("java").endsWith("org.mstar.jobs.Mstar")
                .containsSubsequence("-cp", "@" + CLASSPATH_FILE);
        assertThat(env(config)).containsEntry("JAVA_HOME", "/opt/java")
                .hasEntrySatisfying("PATH", path -> assertThat(path).startsWith("/opt/java/bin:"));
        assertThat(config.path("User").asText()).isEqualTo("10001:10001");
        assertThat(config.path("WorkingDir").asText()).isEqualTo("/var/lib/mstar");
        assertThat(config.path("ExposedPorts").has("9249/tcp")).as("the metrics port").isTrue();
    }

    @Test
    void theCpuImageHoldsTheRuntimeTheLibrariesItLinksTheJobAndFlink() throws IOException {
        assertThat(cpu.modeOf("/opt/java/bin/java")).isEqualTo(0755);
        assertThat(cpu.layerWith("/opt/java/lib/server/libjvm.so")).isNotNull();
        assertThat(cpu.modeOf(LOADER)).isEqualTo(0755);
        assertThat(cpu.layerWith("/lib/x86_64-linux-gnu/libc.so.6")).isNotNull();
        assertThat(cpu.layerWith("/lib/x86_64-linux-gnu/libstdc++.so.6")).as("RocksDB's JNI library").isNotNull();
        assertThat(cpu.layerWith("/opt/mstar/app/classes/org/mstar/jobs/Mstar.class")).isNotNull();
        assertThat(cpu.layerWith("/opt/mstar/lib/flink-runtime-" + EnvironmentInformation.getVersion() + ".jar"))
                .isNotNull();
        assertThat(cpu.layerWith("/opt/mstar/lib/kafka_2.13-" + AppInfoParser.getVersion() + ".jar"))
                .as("mstar kafka's broker").isNotNull();
        assertThat(cpu.read(CLASSPATH_FILE)).contains("/opt/mstar/app/classes", "/opt/mstar/lib/*");
        assertThat(cpu.modeOf("/var/lib/mstar")).as("the user's working folder and home").isEqualTo(0777);
    }

    @Test
    void theCudaImageIsTheCpuImageLessItsLibrariesOnItsBaseWithTheGpuSettings() {
        Set<String> cudaLayers = cuda.layers().stream().map(OciImageArchive.Layer::digest).collect(Collectors.toSet());
        String libraries = cpu.layerWith(LOADER).digest();
        assertThat(cpu.layers()).filteredOn(l -> !l.digest().equals(libraries))
                .allSatisfy(l -> assertThat(cudaLayers).contains(l.digest()));
        assertThat(cudaLayers).as("the base brings its C library").doesNotContain(libraries);

        JsonNode config = cuda.config();
        assertThat(strings(config.path("Entrypoint"))).isEqualTo(strings(cpu.config().path("Entrypoint")));
        assertThat(env(config)).containsEntry("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
                .hasEntrySatisfying("LD_LIBRARY_PATH", p -> assertThat(p).startsWith("/usr/local/cuda/lib64:"));
        assertThat(config.path("Labels").path("org.mstar.image.base").asText()).isNotEmpty();
    }

    @Test
    void theCudaImageShipsTheKernelsThisBuildCompiled() throws IOException {
        assumeTrue(Files.exists(BUILT_FATBIN), "this build found no nvcc and compiled no kernels");
        String version = new MstarVersion().getVersion()[0].replaceFirst("^mstar ", "");
        assertThat(cuda.jarEntries("/opt/mstar/app/libs/mstar-kernels-" + version + ".jar"))
                .contains("org/mstar/kernels/mstar_kernels.fatbin", "org/mstar/kernels/linux-x86_64/libmstar_cuda.so");
    }

    /**
     * The entry point, env, user and working folder of the config, in a root of the image's own files (with /proc, as
     * a container runtime mounts it): the runtime, its libraries, the tokenizer's and the engine's native code and
     * the user's writable home all work there, or the bundled tiny model generates nothing.
     */
    @Test
    void theCpuImagesEntryPointGeneratesInARootOfItsOwnFiles(@TempDir Path root) throws Exception {
        assumeTrue(System.getProperty("user.name").equals("root"), "a root of its own needs root (unshare)");
        cpu.unpackRootFs(root);
        Files.createDirectories(root.resolve("proc"));
        JsonNode config = cpu.config();
        String[] user = config.path("User").asText().split(":");
        List<String> command = new ArrayList<>(List.of("unshare", "--fork", "--pid", "--mount", "--mount-proc",
                "--root=" + root, "--wd=" + config.path("WorkingDir").asText(),
                "--setuid=" + user[0], "--setgid=" + user[1]));
        command.addAll(strings(config.path("Entrypoint")));
        command.addAll(List.of("generate", "--prompt", "The capital of France is", "--max-tokens", "8"));

        Path log = root.resolve("entrypoint.log"); // outside the image's folders, written from here
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().clear();
        builder.environment().putAll(env(config));
        Process process = builder.start();
        boolean exited = process.waitFor(2, TimeUnit.MINUTES);
        process.destroyForcibly();
        String output = Files.readString(log);
        assertThat(exited).as(output).isTrue();
        assertThat(process.exitValue()).as(output).isZero();
        assertThat(output).contains("8 generated");
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(s -> out.add(s.asText()));
        return out;
    }

    private static Map<String, String> env(JsonNode config) {
        return strings(config.path("Env")).stream()
                .collect(Collectors.toMap(e -> e.substring(0, e.indexOf('=')), e -> e.substring(e.indexOf('=') + 1)));
    }
}
