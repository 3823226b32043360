package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * docker/compose.yaml: its serve service runs a command line {@code serve} accepts, on the CUDA image the images
 * profile builds (docs/guides/deploy/images.md), with its state in the volume mounted on the image's working folder and its
 * metrics on the port the image exposes (ContainerImagesIT checks the image's side).
 */
class ComposeFileTest {
    private static final Path COMPOSE = Path.of("..", "docker", "compose.yaml");
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory());

    @Test
    void theServeServiceRunsAServeCommandLineOnTheCudaImageWithItsStateInAVolume() throws IOException {
        JsonNode service = YAML.readTree(COMPOSE.toFile()).path("services").path("serve");
        String version = new MstarVersion().getVersion()[0].replaceFirst("^mstar ", "");
        assertThat(service.path("image").asText()).isEqualTo("mstar-cuda:" + version);

        List<String> args = new ArrayList<>();
        service.path("command").forEach(a -> args.add(interpolated(a.asText())));
        CommandLine.ParseResult parsed = new CommandLine(new Mstar()).parseArgs(args.toArray(String[]::new));
        ServeCommand serve = (ServeCommand) parsed.subcommand().commandSpec().userObject();
        assertThat(serve.device).isEqualTo("cuda:0");
        assertThat(Path.of(serve.stateDir).isAbsolute()).as("in the working folder").isFalse();
        assertThat(texts(service.path("volumes"))).contains("state:/var/lib/mstar");
        assertThat(serve.metricsPort).as("the port the image exposes").isEqualTo(9249);
        assertThat(texts(service.path("ports"))).contains("9249:" + serve.metricsPort);
    }

    /** What compose makes of ${NAME:-default} (the default) and ${NAME:?error} (here, a value that is set). */
    private static String interpolated(String value) {
        return value.replaceAll("\\$\\{\\w+:-([^}]*)}", "$1").replaceAll("\\$\\{(\\w+):\\?[^}]*}", "$1");
    }

    private static List<String> texts(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(a -> out.add(a.asText()));
        return out;
    }
}
