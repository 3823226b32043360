package org.mstar.engine.llama;

import org.mstar.engine.LlamaEngine;

/** Fixture for RunnerBoundaryRulesTest: a class of a runner package that holds an engine, which the rules refuse. */
final class ReachesAnEngine {
    LlamaEngine engine;
}
