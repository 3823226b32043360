package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.model.lora.RandomPeftAdapters;
import org.mstar.model.tokenizer.TextTokenizer;
import picocli.CommandLine;

/**
 * {@code mstar generate --adapter NAME}: one prompt through one LoRA adapter of a folder, or a 400 naming it;
 * {@code --quantization fp8}, the same prompt with the projections kept in FP8; {@code --kv-cache-dtype fp8_e4m3}, with
 * FP8 KV pages; and a Bamba folder, served by the
 * hybrid engine, printing transformers' continuation.
 */
class GenerateCommandTest {
    @TempDir
    static Path dir;

    @BeforeAll
    static void writeModelAndAdapters() throws Exception {
        RandomModel.write(dir.resolve("model"), 3);
        RandomPeftAdapters.write(dir.resolve("adapters"), RandomModel.CONFIG, new RandomPeftAdapters.Spec("support",
                8, 16, false, List.of("q_proj", "v_proj", "down_proj")), 5);
    }

    /** Exit status, stdout and the error stream of one {@code mstar} run. */
    private record Run(int status, String out, String err) {}

    /** {@code generate} on the random Llama and the prompt "hi", greedy, 8 tokens, with {@code extra} flags. */
    private static Run generate(String... extra) {
        return mstar(java.util.stream.Stream.concat(java.util.stream.Stream.of("generate", "--model",
                dir.resolve("model").toString(), "--prompt", "hi", "--temperature", "0", "--max-tokens", "8"),
                java.util.Arrays.stream(extra)).toArray(String[]::new));
    }

    private static Run mstar(String... args) {
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        StringWriter cliErr = new StringWriter();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            CommandLine cli = Mstar.commandLine();
            cli.setErr(new PrintWriter(cliErr, true));
            int status = cli.execute(args);
            // the first engine of the JVM logs its start to stdout; the text is the rest
            String text = out.toString(StandardCharsets.UTF_8).replaceAll("(?m)^\\d\\d:\\d\\d:\\d\\d,\\d+ [A-Z]+ .*\\R", "");
            return new Run(status, text, err.toString(StandardCharsets.UTF_8) + cliErr);
        } finally {
            System.setOut(stdout);
            System.setErr(stderr);
        }
    }

    @Test
    void theAdapterChangesWhatIsGeneratedAndAnUnknownOneIsA400() {
        Run base = generate();
        Run adapted = generate("--adapters", dir.resolve("adapters").toString(), "--adapter", "support");
        Run baseWithFolder = generate("--adapters", dir.resolve("adapters").toString());

        assertThat(base.status()).as(base.err()).isZero();
        assertThat(adapted.status()).as(adapted.err()).isZero();
        assertThat(adapted.out()).isNotEqualTo(base.out());
        assertThat(baseWithFolder.out()).as("no --adapter: the base model").isEqualTo(base.out());

        Run unknown = generate("--adapters", dir.resolve("adapters").toString(), "--adapter", "legal");
        assertThat(unknown.status()).isEqualTo(1);
        assertThat(unknown.err()).contains("error 400: adapter: unknown adapter 'legal'; this engine serves support");

        Run none = generate("--adapter", "support");
        assertThat(none.status()).isEqualTo(1);
        assertThat(none.err()).contains("error 400: adapter: this model serves no adapters");
    }

    @Test
    void fp8QuantizationGeneratesWithAdaptersToo() {
        Run fp8 = generate("--quantization", "fp8");
        assertThat(fp8.status()).as(fp8.err()).isZero();
        assertThat(fp8.out()).isNotBlank();
        Run adapted = generate("--quantization", "fp8", "--adapters", dir.resolve("adapters").toString(), "--adapter",
                "support");
        assertThat(adapted.status()).as(adapted.err()).isZero();
        assertThat(adapted.out()).isNotEqualTo(fp8.out());
    }

    @Test
    void fp8KvPagesGenerateAndUnknownCacheDTypesAreRefusedByName() {
        Run fp8 = generate("--kv-cache-dtype", "fp8_e4m3");
        assertThat(fp8.status()).as(fp8.err()).isZero();
        assertThat(fp8.out()).isNotBlank();
        Run unknown = generate("--kv-cache-dtype", "int4");
        assertThat(unknown.status()).isNotZero();
        assertThat(unknown.err()).contains("'fp8_e4m3'").contains("'int4'");
    }

    @Test
    void aBambaFolderPrintsTransformersContinuation() throws Exception {
        Path bamba = TinyHybrid.copyTo("bamba", dir.resolve("bamba"));
        TinyHybrid.Reference ref = TinyHybrid.reference("bamba", dir.resolve("bamba-reference"));
        int[] prompt = ref.prompts().get(1);
        int[] continuation = java.util.Arrays.copyOf(ref.tokens().get(1), 40);
        Run run = mstar("generate", "--model", bamba.toString(), "--prompt-ids", java.util.Arrays.stream(prompt)
                .mapToObj(Integer::toString).collect(java.util.stream.Collectors.joining(",")), "--temperature", "0",
                "--max-tokens", "40");

        assertThat(run.status()).as(run.err()).isZero();
        try (TextTokenizer tokenizer = TextTokenizer.load(bamba)) {
            String text = tokenizer.decode(continuation);
            assertThat(text).as("the continuation as text").isNotBlank();
            assertThat(run.out()).isEqualTo(text + System.lineSeparator());
        }
        assertThat(run.err()).contains("[" + prompt.length + " prompt tokens, 40 generated, finish=length");

        Run fp8 = mstar("generate", "--model", bamba.toString(), "--prompt", "hi", "--quantization", "fp8");
        assertThat(fp8.status()).isEqualTo(2);
        assertThat(fp8.err()).contains("--quantization fp8: a Mamba2 or Bamba model is served with its weights as"
                + " stored");
    }

    @Test
    void randomWeightsOfABambaConfigAreServedByTheHybridEngine() throws Exception {
        Path config = FixtureFiles.copy("bamba", "config.json", Files.createDirectories(dir.resolve("bamba-config")));
        Run run = mstar("generate", "--random", config.toString(), "--prompt", "hi", "--temperature", "0",
                "--max-tokens", "6");

        assertThat(run.status()).as(run.err()).isZero();
        assertThat(run.err()).contains("prompt tokens, 6 generated, finish=length");
    }

    @Test
    void randomAdaptersGoWithARandomModelOnly() {
        Run both = generate("--random-adapters", "2");
        assertThat(both.status()).isEqualTo(2);
        assertThat(both.err()).contains("--random-adapters goes with --random (or no --model), and instead of"
                + " --adapters").doesNotContain("Exception");
    }

    @Test
    void tensorParallelGeneratesWhatOneDeviceDoes() {
        Run one = generate();
        Run split = generate("--tensor-parallel", "2");
        assertThat(split.status()).as(split.err()).isZero();
        assertThat(split.out()).isNotBlank().isEqualTo(one.out());
        assertThat(split.err()).contains("8 generated, finish=length");

        Run indivisible = generate("--tensor-parallel", "4");
        assertThat(indivisible.status()).isEqualTo(2);
        assertThat(indivisible.err()).contains("tensor parallel 4 does not divide the 2 key-value heads").doesNotContain(
                "Exception");
    }
}
