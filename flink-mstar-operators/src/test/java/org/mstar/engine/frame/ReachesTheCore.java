package org.mstar.engine.frame;

import org.mstar.engine.LlamaEngine;

/** Fixture for RunnerBoundaryRulesTest: a class of the frame engine's package that holds an engine of the core. */
final class ReachesTheCore {
    LlamaEngine engine;
}
