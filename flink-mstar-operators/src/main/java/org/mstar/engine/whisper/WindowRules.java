package org.mstar.engine.whisper;

import org.mstar.model.whisper.TimestampRules;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperPrompts;

/**
 * What every {@link Transcription} of one model decodes by: its prompts and suppressions, its timestamp rules,
 * its end token, and when a window is full.
 *
 * @param maxWindowTokens tokens one window may generate; 0: up to the decoder's last position
 * @param maxPositions the decoder's positions: a window's sequence never reaches past them
 */
record WindowRules(WhisperPrompts prompts, TimestampRules timestamps, int eos, int maxWindowTokens,
                   int maxPositions) {

    static WindowRules of(WhisperConfig config, int maxWindowTokens) {
        return new WindowRules(new WhisperPrompts(config), new TimestampRules(config), config.eosTokenId(),
                maxWindowTokens, config.maxTargetPositions());
    }
}
