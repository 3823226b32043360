package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.apache.commons.io.FileUtils;
import picocli.CommandLine;

/**
 * A model folder, schema file or device that cannot be used is one line on stderr naming the file (or device) and
 * the cause, and exit code 2: no stack trace.
 */
class StartUpErrorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    @TempDir
    static Path dir;
    private static Path good;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    @BeforeAll
    static void writeModel() throws IOException {
        good = dir.resolve("good");
        RandomModel.write(good, 1);
    }

    /** A copy of the good folder, changed by {@code change}. */
    private static Path broken(String name, Change change) throws IOException {
        Path folder = dir.resolve(name);
        FileUtils.copyDirectory(good.toFile(), folder.toFile());
        change.apply(folder);
        return folder;
    }

    private interface Change {
        void apply(Path folder) throws IOException;
    }

    private static Change config(java.util.function.Consumer<ObjectNode> edit) {
        return folder -> {
            ObjectNode c = (ObjectNode) JSON.readTree(folder.resolve("config.json").toFile());
            edit.accept(c);
            JSON.writeValue(folder.resolve("config.json").toFile(), c);
        };
    }

    static Stream<Arguments> brokenFolders() throws IOException {
        return Stream.of(
                Arguments.of(broken("unknown-arch", config(c -> c.putArray("architectures").add("FooForCausalLM"))),
                        "config.json", "unsupported architecture 'FooForCausalLM'"),
                Arguments.of(broken("no-weights", f -> Files.delete(f.resolve("model.safetensors"))),
                        "no-weights", "no model.safetensors"),
                Arguments.of(broken("truncated", f -> {
                    try (RandomAccessFile file = new RandomAccessFile(f.resolve("model.safetensors").toFile(), "rw")) {
                        file.setLength(file.length() / 2);
                    }
                }), "model.safetensors", "lie outside"),
                Arguments.of(broken("garbage-header", f -> {
                    try (RandomAccessFile file = new RandomAccessFile(f.resolve("model.safetensors").toFile(), "rw")) {
                        file.seek(8);
                        file.write("garbage!".getBytes(StandardCharsets.US_ASCII));
                    }
                }), "model.safetensors", "header is not valid JSON"),
                Arguments.of(broken("missing-tensor", StartUpErrorsTest::dropATensor), "missing-tensor",
                        "model.norm.weight not found"),
                Arguments.of(broken("rope-type", config(c -> c.putObject("rope_scaling").put("rope_type", "weird")
                        .put("factor", 2.0))), "config.json", "rope scaling type 'weird' is not supported"),
                Arguments.of(broken("longrope-beside", config(c -> {
                    c.putObject("rope_parameters").put("rope_type", "default").put("rope_theta", 10000.0);
                    c.putObject("rope_scaling").put("type", "longrope");
                })), "config.json", "rope_scaling (rope_type 'longrope') disagrees with rope_parameters"),
                Arguments.of(broken("trailing", f -> Files.writeString(f.resolve("config.json"), " x",
                        java.nio.file.StandardOpenOption.APPEND)), "config.json", "not valid JSON"),
                Arguments.of(broken("model-type", config(c -> c.put("model_type", "qwen2"))), "config.json",
                        "model_type 'qwen2' contradicts architectures"));
    }

    /** Rewrites the safetensors header without the final norm's entry (the data stays where it was). */
    private static void dropATensor(Path folder) throws IOException {
        Path file = folder.resolve("model.safetensors");
        byte[] all = Files.readAllBytes(file);
        int n = (int) ByteBuffer.wrap(all, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        ObjectNode header = (ObjectNode) JSON.readTree(new String(all, 8, n, StandardCharsets.UTF_8));
        assertThat(header.remove("model.norm.weight")).isNotNull();
        byte[] h = JSON.writeValueAsBytes(header);
        byte[] padded = (new String(h, StandardCharsets.UTF_8) + " ".repeat((8 - h.length % 8) % 8))
                .getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + padded.length + all.length - 8 - n).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(padded.length).put(padded).put(all, 8 + n, all.length - 8 - n);
        Files.write(file, b.array());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("brokenFolders")
    void aModelFolderThatCannotBeLoadedIsOneLine(Path folder, String names, String cause) {
        assertThat(run("generate", "--model", folder.toString(), "--prompt", "hi", "--max-tokens", "1")).isEqualTo(2);
        assertOneLine(names, cause);
    }

    @Test
    void schemaFilesThatCannotBeReadOrParsedAreOneLine() throws IOException {
        Path missing = dir.resolve("none.json");
        assertThat(run("generate", "--model", good.toString(), "--prompt", "hi", "--json-schema", missing.toString()))
                .isEqualTo(2);
        assertThat(err.toString()).startsWith("mstar generate: --json-schema " + missing + ": no such file");
        assertNoTrace();
        err.getBuffer().setLength(0);
        Path avsc = dir.resolve("bad.avsc");
        Files.writeString(avsc, "{\"type\": \"record\", \"name\": \"R\", \"fields\": [{\"name\": \"a\", \"type\": \"nope\"}]}");
        assertThat(run("generate", "--model", good.toString(), "--prompt", "hi", "--avro-schema", avsc.toString()))
                .isEqualTo(2);
        assertThat(err.toString()).startsWith("mstar generate: --avro-schema " + avsc + ": not a valid Avro schema: "
                + "\"nope\" is not a defined name");
        assertNoTrace();
    }

    @Test
    void aSchemaTheEngineWouldRefuseIsRefusedBeforeSendingWithItsKeywordsInOrder() throws IOException {
        Path schema = dir.resolve("pattern.json");
        Files.writeString(schema, "{\"type\": \"string\", \"pattern\": \"a+\"}");
        assertThat(run("generate", "--model", good.toString(), "--prompt", "hi", "--json-schema", schema.toString()))
                .isEqualTo(2);
        assertThat(err.toString()).startsWith("mstar generate: --json-schema " + schema + ": json_schema: at #: keyword"
                + " 'pattern' is not supported; supported: type, properties, required, additionalProperties, enum,"
                + " const, items, minItems, maxItems, minLength, maxLength, minimum, maximum, anyOf");
        err.getBuffer().setLength(0);
        Path map = dir.resolve("map.avsc");
        Files.writeString(map, "{\"type\": \"record\", \"name\": \"M\", \"fields\": [{\"name\": \"attrs\","
                + " \"type\": {\"type\": \"map\", \"values\": \"string\"}}]}");
        assertThat(run("send", "--avro-schema", map.toString(), "hi")).isEqualTo(2);
        assertThat(err.toString()).startsWith("mstar send: --avro-schema " + map + ": Avro type map at M.attrs");
        assertNoTrace();
    }

    @Test
    void sendWithNothingToSendSaysSo() {
        java.io.InputStream stdin = System.in;
        System.setIn(new java.io.ByteArrayInputStream(new byte[0]));
        try {
            assertThat(run("send")).isEqualTo(2);
        } finally {
            System.setIn(stdin);
        }
        assertThat(err.toString()).startsWith("Nothing to send: give prompts as arguments, one per line on stdin");
    }

    @Test
    void aDeviceThatCannotBeOpenedIsOneLine() {
        // cuda:99: no such device where there is a GPU, no driver where there is none
        assertThat(run("generate", "--model", good.toString(), "--prompt", "hi", "--device", "cuda:99")).isEqualTo(2);
        assertOneLine("cuda:99", "cannot open cuda:99");
    }

    @Test
    void framesStopsOnADeviceItCannotOpenAndNamesAnUnknownDtype() {
        assertThat(run("frames", "--device", "cuda:99", "--sessions", "1", "--frames", "1")).isEqualTo(2);
        assertThat(err.toString()).contains("mstar frames: cannot open cuda:99");
        assertNoTrace();
        err.getBuffer().setLength(0);
        assertThat(run("frames", "--dtype", "F64")).isEqualTo(2);
        assertThat(err.toString()).contains("'mstar.frames.dtype' (--dtype) is F32, BF16 or F16, not 'F64'");
        assertNoTrace();
    }

    @Test
    void serveStopsOnAModelItCannotLoadInsteadOfRestarting() throws Exception {
        Path truncated = broken("serve-truncated", f -> {
            try (RandomAccessFile file = new RandomAccessFile(f.resolve("model.safetensors").toFile(), "rw")) {
                file.setLength(file.length() / 2);
            }
        });
        try (EmbeddedKafkaBroker broker = EmbeddedKafkaBroker.start()) {
            assertThat(run("serve", "--model", truncated.toString(), "--bootstrap-servers", broker.bootstrapServers(),
                    "--state-dir", dir.resolve("serve-state").toString())).isEqualTo(2);
        }
        List<String> lines = err.toString().strip().lines().toList();
        assertThat(lines.get(lines.size() - 1)).startsWith("mstar serve: " + truncated.resolve("model.safetensors"))
                .contains("lie outside");
        // it never said it was running: the engine's task never ran
        assertThat(err.toString()).doesNotContain("is running");
        assertNoTrace();
    }

    private void assertOneLine(String names, String cause) {
        String text = err.toString().strip();
        assertThat(text.lines()).hasSize(1);
        assertThat(text).startsWith("mstar ").contains(names, cause);
        assertNoTrace();
    }

    private void assertNoTrace() {
        assertThat(err.toString()).doesNotContain("Exception", "\tat ");
    }

    private int run(String... args) {
        CommandLine cli = Mstar.commandLine();
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        return cli.execute(args);
    }
}
