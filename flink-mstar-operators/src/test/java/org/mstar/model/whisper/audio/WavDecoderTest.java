package org.mstar.model.whisper.audio;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class WavDecoderTest {
    @Test
    void sixteenBitPcmScalesByTwoToTheFifteen() throws Exception {
        byte[] frames = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN)
                .putShort((short) 0).putShort((short) 16384).putShort((short) -32768).putShort((short) 32767).array();
        WavAudio audio = WavDecoder.decode(TestWavs.wav(1, 1, 16, 16_000, frames));

        assertThat(audio.sampleRate()).isEqualTo(16_000);
        assertThat(audio.channels()).isEqualTo(1);
        assertThat(audio.samples()).containsExactly(0f, 0.5f, -1f, 32767f / 32768f);
    }

    @Test
    void eightBitIsUnsignedAroundOneTwentyEight() throws Exception {
        byte[] frames = {(byte) 128, (byte) 192, 0, (byte) 255};
        assertThat(WavDecoder.decode(TestWavs.wav(1, 1, 8, 8_000, frames)).samples())
                .containsExactly(0f, 0.5f, -1f, 127f / 128f);
    }

    @Test
    void channelsAreAveraged() throws Exception {
        ByteBuffer frames = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        frames.putFloat(0.5f).putFloat(-0.25f).putFloat(1f).putFloat(1f);  // two stereo float frames
        WavAudio audio = WavDecoder.decode(TestWavs.wav(3, 2, 32, 44_100, frames.array()));

        assertThat(audio.channels()).isEqualTo(2);
        assertThat(audio.sampleRate()).isEqualTo(44_100);
        assertThat(audio.samples()).containsExactly(0.125f, 1f);
    }

    @Test
    void twentyFourBitIsSignExtended() throws Exception {
        byte[] frames = {0, 0, (byte) 0x80, (byte) 0xff, (byte) 0xff, (byte) 0x7f};  // -2^23, 2^23 - 1
        assertThat(WavDecoder.decode(TestWavs.wav(1, 1, 24, 16_000, frames)).samples())
                .containsExactly(-1f, (float) ((Math.pow(2, 23) - 1) / Math.pow(2, 23)));
    }

    @Test
    void aDataChunkWithNoFramesIsEmptyAudio() throws Exception {
        assertThat(WavDecoder.decode(TestWavs.wav(1, 1, 16, 16_000, new byte[0])).samples()).isEmpty();
    }

    @Test
    void bytesThatAreNotWavAreRefusedSayingSo() {
        assertThatThrownBy(() -> WavDecoder.decode("hello, not audio".getBytes()))
                .isInstanceOf(WavFormatException.class).hasMessageContaining("not a WAV file");
        assertThatThrownBy(() -> WavDecoder.decode(new byte[3])).isInstanceOf(WavFormatException.class);
    }

    @Test
    void aHeaderWithoutAFormatChunkIsRefused() {
        byte[] riff = Arrays.copyOf(TestWavs.tone(0.1, 440, 16_000), 12);
        assertThatThrownBy(() -> WavDecoder.decode(riff)).isInstanceOf(WavFormatException.class);
    }

    @Test
    void compressedWavEncodingsAreRefused() {
        // format tag 6: A-law, which this front end does not decode
        assertThatThrownBy(() -> WavDecoder.decode(TestWavs.wav(6, 1, 8, 8_000, new byte[16])))
                .isInstanceOf(WavFormatException.class);
    }
}
