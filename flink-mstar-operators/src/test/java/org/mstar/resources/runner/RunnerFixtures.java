package org.mstar.resources.runner;

import org.mstar.resources.ResourceStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Steps and contexts for runner tests. */
final class RunnerFixtures {
    private RunnerFixtures() {}

    /** A resource step with nothing of its own beyond segments. */
    static final class PlainStep extends ResourceStep {
        PlainStep(List<Segment> segments) {
            super(segments);
        }
    }

    static StepContext ctx(String... rids) {
        return new StepContext(List.of(rids), "decode", 0, false);
    }

    /** A step declaring {@code keys}, one decode token per request of {@code ctx}. */
    static SubmoduleStep step(StepContext ctx, String... keys) {
        Map<String, ResourceStep> steps = new LinkedHashMap<>();
        for (String key : keys) {
            steps.put(key, new PlainStep(null));
        }
        List<Segment> segments = ctx.requestIds().stream().map(rid -> new Segment(rid, Segment.MAIN, 1)).toList();
        return new SubmoduleStep(steps, segments).setCtx(ctx);
    }
}
