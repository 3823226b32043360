package org.mstar.resources;

import org.mstar.engine.GenerationRequest;

/** Fixture for RunnerBoundaryRulesTest: a resource-layer class that reads the engine's request. */
final class ReachesTheEngine {
    GenerationRequest request;
}
