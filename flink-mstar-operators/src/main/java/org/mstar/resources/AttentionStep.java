package org.mstar.resources;

import java.util.List;

/**
 * {@code causal}: query t of a view attends keys [0, length - toCompute + t]; false lets the new tokens
 * see the whole stream. {@code contextOnly}: queries attend only the committed context, not this step's
 * own tokens.
 */
public final class AttentionStep extends ResourceStep {
    private final boolean causal;
    private final boolean contextOnly;

    public AttentionStep(List<Segment> segments, boolean causal, boolean contextOnly) {
        super(segments);
        this.causal = causal;
        this.contextOnly = contextOnly;
    }

    public AttentionStep() {
        this(null, true, false);
    }

    public boolean causal() { return causal; }
    public boolean contextOnly() { return contextOnly; }
}
