package org.mstar.resources;

import java.util.Objects;

/**
 * One step's addition to a request's cache stream.
 *
 * <p>A request contributes one segment per label active for it in a step; the batch's ordered
 * segment list defines the layout of every per-token array. {@code span} may be 0: a zero-span
 * segment reads its stream without extending it (admit reserves nothing, commit is a no-op).
 */
public record Segment(String requestId, String label, int span) {
    public Segment {
        Objects.requireNonNull(requestId, "requestId");
        Objects.requireNonNull(label, "label");
        if (span < 0) {
            throw new IllegalArgumentException("span must be >= 0, got " + span);
        }
    }

    /** The label a model uses when it names none. */
    public static final String MAIN = "main";
}
