package org.mstar.jobs;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.mstar.engine.EngineStats;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.StepTimings;

/**
 * Where a bare engine's host time went over one benchmark row: steps, mean host milliseconds per step in each
 * phase of {@link StepTimings} (WAIT is the host waiting for the device), decode-graph replays, steps launched ahead
 * and preemptions. Read before and after the row.
 */
record HostProfile(long replays, long launchedAhead, long preemptions, long generated) {
    static HostProfile start(LlamaEngine engine) {
        engine.stepTimings().reset();
        EngineStats s = engine.stats();
        return new HostProfile(engine.decodeGraphReplays(), engine.launchedAhead(), s.preemptions(),
                s.generatedTokens());
    }

    /** The row's profile, for the JSON and a line on stderr. */
    Map<String, Object> end(LlamaEngine engine, double seconds) {
        StepTimings t = engine.stepTimings();
        EngineStats s = engine.stats();
        Map<String, Object> p = new LinkedHashMap<>();
        long steps = t.steps();
        p.put("steps", steps);
        p.put("msPerStep", round(seconds * 1e3 / Math.max(1, steps)));
        p.put("tokensPerStep", round((s.generatedTokens() - generated) / (double) Math.max(1, steps)));
        Map<String, Double> phases = new LinkedHashMap<>();
        t.millisPerStep().forEach((phase, ms) -> phases.put(phase.name().toLowerCase(Locale.ROOT), round(ms)));
        p.put("hostMsPerStepByPhase", phases);
        p.put("decodeGraphReplays", engine.decodeGraphReplays() - replays);
        p.put("launchedAhead", engine.launchedAhead() - launchedAhead);
        p.put("preemptions", s.preemptions() - preemptions);
        return p;
    }

    private static double round(double v) {
        return Math.round(v * 1000) / 1000.0;
    }
}
