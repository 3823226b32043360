package org.mstar.engine.whisper;

import org.mstar.engine.WhisperEngine;

/** Fixture for RunnerBoundaryRulesTest: a class of the Whisper runner's package that holds an engine. */
final class ReachesTheCore {
    WhisperEngine engine;
}
