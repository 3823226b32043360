package org.mstar.jobs;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import org.mstar.device.Device;
import org.mstar.device.Devices;
import org.mstar.engine.AudioInput;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;
import org.mstar.engine.whisper.WhisperEngineOptions;
import org.mstar.model.ModelConfig;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.audio.WavAudio;
import org.mstar.model.whisper.audio.WavDecoder;
import org.mstar.model.whisper.audio.WavFormatException;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code mstar transcribe}: a Whisper model alone (no Flink, no Kafka) on one WAV file, printing the transcript as
 * it is decoded. Audio longer than 30 s is decoded window by window.
 */
@Command(name = "transcribe", mixinStandardHelpOptions = true,
        description = "Transcribe one WAV file (16 kHz) with a Whisper model alone, printing the text as it is decoded.")
final class TranscribeCommand implements Callable<Integer> {
    private static final int PAGE_SIZE = 16;

    @Parameters(index = "0", paramLabel = "FILE.wav", description = "RIFF/WAVE, PCM or float, 16 kHz; channels are averaged.")
    Path file;

    @Option(names = "--model", required = true, paramLabel = "DIR",
            description = "Whisper model folder (Hugging Face layout: config.json with model_type whisper,"
                    + " generation_config.json, *.safetensors, tokenizer.json).")
    Path model;

    @Option(names = "--language", paramLabel = "CODE", description = "Spoken language (en, de, ...). Default: detected.")
    String language;

    @Option(names = "--task", defaultValue = "transcribe",
            description = "transcribe or translate (into English). Default: ${DEFAULT-VALUE}.")
    String task;

    @Option(names = "--timestamps", description = "Timestamp tokens in the output.")
    boolean timestamps;

    @Option(names = "--max-tokens", paramLabel = "N", description = "Most tokens in all. Default: until the audio ends.")
    Integer maxTokens;

    @Option(names = "--temperature", defaultValue = "0", description = "0 is greedy (default: ${DEFAULT-VALUE}).")
    double temperature;

    @Option(names = "--device", defaultValue = "cpu", description = "cpu or cuda:N (default: ${DEFAULT-VALUE}).")
    String device;

    @Override
    public Integer call() {
        if (!Files.isRegularFile(model.resolve(ModelConfig.FILE_NAME))) {
            throw new IllegalArgumentException("--model " + model + ": no " + ModelConfig.FILE_NAME + " in it");
        }
        if (!WhisperConfig.isWhisper(model)) {
            throw new IllegalArgumentException("--model " + model + ": not a Whisper model (config.json's model_type"
                    + " is not '" + WhisperConfig.MODEL_TYPE + "'); `mstar generate` runs text models");
        }
        AudioInput audio = new AudioInput(samples(file), language, task, timestamps);
        WhisperConfig config = config(model);
        int pages = (config.encoderFrames() + PAGE_SIZE - 1) / PAGE_SIZE
                + (config.maxTargetPositions() + PAGE_SIZE - 1) / PAGE_SIZE + 1;
        SamplingReqConfig sampling = new SamplingReqConfig(temperature, 0, 1.0, false, 1.0, 0.0, 0, 0, false, 1,
                true, 0L);
        GenerationRequest request = GenerationRequest.builder("cli").audio(audio).sampling(sampling)
                .maxTokens(maxTokens == null ? Integer.MAX_VALUE : maxTokens).build();
        PrintStream out = System.out;
        try (Device dev = Devices.open(device);
             WhisperEngine engine = WhisperEngineLoader.load(model, dev,
                     new WhisperEngineOptions(1, pages, PAGE_SIZE).withDecodeGraphs(dev.isCuda()))) {
            try {
                engine.submit(request);
            } catch (RequestValidationException e) {
                System.err.println("error 400: " + e.getMessage());
                return 1;
            }
            FinishedRequest done = StreamedRun.toEnd(engine, out);
            if (done == null) {
                return 1;
            }
            System.err.printf("[%.1f s of audio, %d tokens, finish=%s, %.1f s]%n",
                    audio.samples().length / (double) AudioInput.SAMPLE_RATE, done.tokenIds().length,
                    done.finish().wireName(), done.timings().totalNanos() / 1e9);
            return 0;
        }
    }

    /** The file's samples, refused with a message when they are not 16 kHz WAV audio. */
    private static float[] samples(Path file) {
        WavAudio wav;
        try {
            wav = WavDecoder.decode(Files.readAllBytes(file));
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": cannot read it (" + e + ")");
        } catch (WavFormatException e) {
            throw new IllegalArgumentException(file + ": " + e.getMessage());
        }
        if (wav.sampleRate() != AudioInput.SAMPLE_RATE) {
            throw new IllegalArgumentException(file + ": sample rate is " + wav.sampleRate() + " Hz; "
                    + AudioInput.SAMPLE_RATE + " Hz is required (convert it first, e.g. ffmpeg -i IN -ar 16000 OUT.wav)");
        }
        if (wav.samples().length == 0) {
            throw new IllegalArgumentException(file + ": the WAV file holds no samples");
        }
        return wav.samples();
    }

    private static WhisperConfig config(Path model) {
        try {
            return WhisperConfig.load(model);
        } catch (IOException e) {
            throw new IllegalArgumentException("--model " + model + ": " + e.getMessage());
        }
    }
}
