package org.mstar.resources;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Everything one submodule asks of its resources for one step: a {@link ResourceStep} per resource
 * key, default segments for the steps that name none, and the step's {@link StepContext}.
 */
public final class SubmoduleStep {
    private final Map<String, ResourceStep> steps;
    private final List<Segment> segments;
    private final Object cgKeyInfo;
    private StepContext ctx;

    public SubmoduleStep(Map<String, ? extends ResourceStep> steps, List<Segment> segments, Object cgKeyInfo) {
        this.steps = Collections.unmodifiableMap(new LinkedHashMap<>(steps));
        this.segments = segments == null ? null : List.copyOf(segments);
        this.cgKeyInfo = cgKeyInfo;
        for (ResourceStep s : this.steps.values()) {
            s.defaultSegments(this.segments);
        }
    }

    public SubmoduleStep(Map<String, ? extends ResourceStep> steps, List<Segment> segments) {
        this(steps, segments, null);
    }

    public ResourceStep get(String key) {
        return steps.get(key);
    }

    public Set<String> keys() {
        return steps.keySet();
    }

    public Map<String, ResourceStep> steps() {
        return steps;
    }

    /** The default segments, or null when every step named its own. */
    public List<Segment> segments() {
        return segments;
    }

    public Object cgKeyInfo() {
        return cgKeyInfo;
    }

    public StepContext ctx() {
        if (ctx == null) {
            throw new IllegalStateException("step has no context; call setCtx before running it");
        }
        return ctx;
    }

    public SubmoduleStep setCtx(StepContext ctx) {
        this.ctx = ctx;
        return this;
    }
}
