package org.mstar.model.whisper.audio;

/** Decoded WAV audio: mono samples in [-1, 1] (channels averaged) at the file's own sample rate. */
public record WavAudio(float[] samples, int sampleRate, int channels) {
    public double seconds() {
        return samples.length / (double) sampleRate;
    }
}
