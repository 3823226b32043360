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
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.StepResult;
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.model.whisper.audio.TestWavs;
import org.mstar.model.whisper.audio.WavDecoder;

/** {@code mstar transcribe} on the tiny Whisper checkpoint: the engine's transcript, and usage errors. */
class TranscribeCommandTest {
    @TempDir
    static Path dir;
    private static Path model;
    private static Path tone;

    private final StringWriter err = new StringWriter();

    @BeforeAll
    static void fixtures() throws Exception {
        model = TinyWhisper.copyTo(dir.resolve("tiny-whisper"));
        tone = Files.write(dir.resolve("tone.wav"), TinyWhisper.clipWav("tone", dir.resolve("scratch")));
    }

    @Test
    void printsWhatTheEngineTranscribes() throws Exception {
        String expected = engineText(WavDecoder.decode(Files.readAllBytes(tone)).samples(), 12);

        String out = run("transcribe", tone.toString(), "--model", model.toString(), "--language", "en",
                "--max-tokens", "12");

        assertThat(err.toString()).contains("[2.0 s of audio, 12 tokens, finish=length");
        assertThat(out).isEqualTo(expected + System.lineSeparator());
        assertThat(expected).isNotBlank();
    }

    @Test
    void refusesWhatItCannotTranscribeInOneLine() throws Exception {
        Path cd = Files.write(dir.resolve("cd.wav"), TestWavs.tone(0.5, 440, 44_100));
        assertThat(run("transcribe", cd.toString(), "--model", model.toString())).isEmpty();
        assertThat(err.toString()).contains("mstar transcribe: " + cd + ": sample rate is 44100 Hz; 16000 Hz is required")
                .doesNotContain("Exception");
        err.getBuffer().setLength(0);

        Path text = Files.writeString(dir.resolve("notes.wav"), "not audio");
        run("transcribe", text.toString(), "--model", model.toString());
        assertThat(err.toString()).contains(text + ": not a WAV file");
        err.getBuffer().setLength(0);

        Path llama = Files.createDirectories(dir.resolve("llama"));
        Files.writeString(llama.resolve("config.json"), "{\"model_type\": \"llama\"}");
        run("transcribe", tone.toString(), "--model", llama.toString());
        assertThat(err.toString()).contains("--model " + llama + ": not a Whisper model");
        err.getBuffer().setLength(0);

        Path noTokenizer = Files.createDirectories(dir.resolve("no-tokenizer"));
        for (String f : List.of("config.json", "generation_config.json", "model.safetensors")) {
            Files.copy(model.resolve(f), noTokenizer.resolve(f));
        }
        assertThat(Mstar.commandLine().setErr(new java.io.PrintWriter(err, true))
                .execute("transcribe", tone.toString(), "--model", noTokenizer.toString())).isEqualTo(2);
        assertThat(err.toString()).contains(noTokenizer.resolve("tokenizer.json") + " is missing: a Whisper folder"
                + " needs its tokenizer");
        err.getBuffer().setLength(0);

        run("transcribe", tone.toString(), "--model", model.toString(), "--language", "xx");
        assertThat(err.toString()).contains("error 400: audio.language:");
    }

    /** The text the engine streams for {@code samples}, English, greedy, at most {@code maxTokens}. */
    private static String engineText(float[] samples, int maxTokens) {
        StringBuilder text = new StringBuilder();
        try (CpuDevice cpu = new CpuDevice(1);
             WhisperEngine engine = WhisperEngineLoader.load(model, cpu, new WhisperEngineOptions(1, 200, 16))) {
            engine.submit(GenerationRequest.builder("e").audio(new AudioInput(samples, "en", "transcribe", false))
                    .maxTokens(maxTokens).build());
            while (engine.hasWork()) {
                StepResult r = engine.step();
                r.tokens().forEach(t -> text.append(t.textDelta()));
            }
        }
        return text.toString();
    }

    /** Runs the command line; returns what it printed on System.out (the transcript), its errors go to {@link #err}. */
    private String run(String... args) {
        PrintStream saved = System.out;
        PrintStream savedErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream engineErr = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(engineErr, true, StandardCharsets.UTF_8));
            Mstar.commandLine().setErr(new PrintWriter(err, true)).execute(args);
        } finally {
            System.setOut(saved);
            System.setErr(savedErr);
        }
        err.append(engineErr.toString(StandardCharsets.UTF_8));
        return out.toString(StandardCharsets.UTF_8);
    }
}
