package org.mstar.engine.frame;

import org.mstar.engine.GenerationRequest;

/** Fixture for RunnerBoundaryRulesTest: a class of the frame engine's package that takes a request of the core. */
final class ReachesTheCore {
    GenerationRequest request;
}
