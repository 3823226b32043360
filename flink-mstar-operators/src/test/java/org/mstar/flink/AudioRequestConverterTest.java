package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.model.whisper.audio.TestWavs;
import org.mstar.model.whisper.audio.WavDecoder;
import org.mstar.resources.RequestValidationException;
import org.mstar.schemas.Audio;
import org.mstar.schemas.GenerateRequest;

/** Speech-to-text requests through the {@link RequestConverter}: inline and referenced WAV, and every refusal. */
class AudioRequestConverterTest {
    private static final byte[] TONE = TestWavs.tone(1.5, 440, 16_000);

    @TempDir
    Path dir;

    private RequestConverter converter(Duration max, Path audioDir) {
        return new RequestConverter(100, new AudioConverter(max, audioDir == null ? null : audioDir.toString()));
    }

    private final RequestConverter inlineOnly = converter(Duration.ofSeconds(2), null);

    @Test
    void inlineWavBecomesTheEngineAudioWithItsOptions() throws Exception {
        GenerationRequest r = inlineOnly.convert(request(Audio.newBuilder().setWav(ByteBuffer.wrap(TONE))
                .setLanguage("de").setTask("translate").setTimestamps(true).build()));

        AudioInput audio = r.audio();
        assertThat(audio.samples()).containsExactly(WavDecoder.decode(TONE).samples());
        assertThat(audio.samples()).hasSize(24_000);
        assertThat(audio.language()).isEqualTo("de");
        assertThat(audio.task()).isEqualTo("translate");
        assertThat(audio.timestamps()).isTrue();
        assertThat(r.promptText()).isNull();
        assertThat(r.promptTokenIds()).isNull();
        assertThat(r.messages()).isNull();
    }

    @Test
    void unsetOptionsMeanTranscribeDetectTheLanguageAndNoTimestamps() {
        AudioInput audio = inlineOnly.convert(request(inline(TONE))).audio();
        assertThat(audio.task()).isEqualTo("transcribe");
        assertThat(audio.language()).isNull();
        assertThat(audio.timestamps()).isFalse();
    }

    @Test
    void speechIsGreedyUnlessTheRequestSetsATemperature() {
        assertThat(inlineOnly.convert(request(inline(TONE))).sampling().temperature()).isZero();
        GenerateRequest warm = request(inline(TONE));
        warm.setTemperature(0.7);
        assertThat(inlineOnly.convert(warm).sampling().temperature()).isEqualTo(0.7);
    }

    @Test
    void badAudioIsRefusedNamingTheProblem() {
        assertRefused(inline("RIFF....not audio at all".getBytes()), "audio.wav: not a WAV file");
        assertRefused(inline("just text".getBytes()), "audio.wav: not a WAV file");
        assertRefused(inline(TestWavs.tone(1, 440, 44_100)), "audio.wav: sample rate is 44100 Hz; 16000 Hz is required");
        assertRefused(inline(TestWavs.pcm16(new float[0], 16_000)), "audio.wav: the WAV file holds no samples");
        assertRefused(inline(TestWavs.tone(2.5, 440, 16_000)), "audio.wav: audio of 2.5 s is longer than mstar.audio.max-duration");
        assertRefused(Audio.newBuilder().build(), "audio: set exactly one of wav and path");
        assertRefused(Audio.newBuilder().setWav(ByteBuffer.wrap(TONE)).setPath("a.wav").build(),
                "audio: set exactly one of wav and path");
        assertRefused(Audio.newBuilder(inline(TONE)).setTask("summarise").build(), "audio.task: must be transcribe or translate");
        assertRefused(Audio.newBuilder(inline(TONE)).setLanguage("English").build(), "audio.language: must be an ISO 639-1 code");
    }

    @Test
    void audioTogetherWithAPromptIsRefused() {
        GenerateRequest both = request(inline(TONE));
        both.setPrompt("hello");
        assertThatThrownBy(() -> inlineOnly.convert(both)).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith("prompt: set exactly one of prompt, prompt_token_ids, messages and audio");
    }

    @Test
    void aPathIsReadInsideTheAudioFolderOnly() throws Exception {
        Files.write(dir.resolve("tone.wav"), TONE);
        Files.createDirectories(dir.resolve("calls"));
        Files.write(dir.resolve("calls/long.wav"), TestWavs.tone(3, 440, 16_000));
        Path outside = Files.createTempFile("outside", ".wav");
        Files.write(outside, TONE);
        RequestConverter withDir = converter(Duration.ofSeconds(2), dir);

        assertThat(withDir.convert(request(byPath("tone.wav"))).audio().samples()).hasSize(24_000);
        assertThat(withDir.convert(request(byPath(dir.resolve("tone.wav").toString()))).audio().samples()).hasSize(24_000);
        assertRefused(withDir, byPath("../" + dir.getFileName() + "/../" + outside.getFileName()), "audio.path: '../");
        assertRefused(withDir, byPath(outside.toString()), "is outside mstar.audio.dir");
        assertRefused(withDir, byPath("missing.wav"), "audio.path: no such file: 'missing.wav'");
        assertRefused(withDir, byPath("calls"), "audio.path: 'calls' is not a file");
        assertRefused(withDir, byPath("calls/long.wav"), "audio.path: audio of 3.0 s is longer than");
        assertRefused(byPath("tone.wav"), "audio.path: audio by path is off on this server (mstar.audio.dir is not set)");
        Files.delete(outside);
    }

    @Test
    void aSymbolicLinkOutOfTheFolderIsRefused() throws Exception {
        Path outside = Files.createTempFile("target", ".wav");
        Files.write(outside, TONE);
        Files.createSymbolicLink(dir.resolve("link.wav"), outside);

        assertRefused(converter(Duration.ofSeconds(2), dir), byPath("link.wav"), "audio.path: 'link.wav' is outside");
        Files.delete(outside);
    }

    @Test
    void aReferencedFileThatIsNotWavIsRefusedBeforeItIsRead() throws Exception {
        Files.writeString(dir.resolve("notes.wav"), "meeting notes");
        assertRefused(converter(Duration.ofSeconds(2), dir), byPath("notes.wav"), "audio.path: not a WAV file");
    }

    private void assertRefused(Audio audio, String message) {
        assertRefused(inlineOnly, audio, message);
    }

    private static void assertRefused(RequestConverter converter, Audio audio, String message) {
        assertThatThrownBy(() -> converter.convert(request(audio))).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith(message.substring(0, Math.min(message.length(), message.indexOf(':') + 1)))
                .hasMessageContaining(message.substring(message.indexOf(':') + 1).trim());
    }

    private static Audio inline(byte[] wav) {
        return Audio.newBuilder().setWav(ByteBuffer.wrap(wav)).build();
    }

    private static Audio byPath(String path) {
        return Audio.newBuilder().setPath(path).build();
    }

    private static GenerateRequest request(Audio audio) {
        return GenerateRequest.newBuilder().setRequestId("speech").setAudio(audio).build();
    }
}
