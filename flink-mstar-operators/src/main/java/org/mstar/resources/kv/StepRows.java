package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.List;
import org.mstar.resources.Fork;
import org.mstar.resources.KVStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/** How the KV manager reads a step's rows: which write to the sink page, which take forks. */
final class StepRows {
    private StepRows() {}

    /**
     * A sink row reserves, addresses and commits nothing; its writes go to the sink page. It is a
     * stream the step names in {@link KVStep#sink()}, or a replay's padding row (during capture itself
     * padding rows are real requests and take real pages).
     */
    static boolean isSink(KVStep step, StepContext ctx, String rid, String label) {
        return isPadding(ctx, rid) || step.sink().contains(new StreamLabel(rid, label));
    }

    static boolean isSink(KVStep step, StepContext ctx, Segment seg) {
        return isSink(step, ctx, seg.requestId(), seg.label());
    }

    static boolean isPadding(StepContext ctx, String rid) {
        return ctx.isPaddingRow(rid) && !ctx.capture();
    }

    /** The padded rows forks apply to: restricted to {@link KVStep#forkRids()} when set, never padding. */
    static List<String> forkRows(KVStep step, StepContext ctx) {
        List<String> rows = new ArrayList<>();
        if (step.preForks().isEmpty() && step.postForks().isEmpty()) {
            return rows;
        }
        for (String rid : ctx.paddedRequestIds()) {
            if ((step.forkRids() == null || step.forkRids().contains(rid)) && !isPadding(ctx, rid)) {
                rows.add(rid);
            }
        }
        return rows;
    }

    /** Whether fork {@code f} of row {@code rid} touches a sink stream (and so is skipped). */
    static boolean forkSkipped(KVStep step, StepContext ctx, String rid, Fork f) {
        return isSink(step, ctx, rid, f.from()) || isSink(step, ctx, rid, f.to());
    }

    /** This step's new tokens on (rid, label), over its non-sink segments. */
    static long spanOf(KVStep step, StepContext ctx, String rid, String label) {
        long n = 0;
        for (Segment s : step.segments()) {
            if (s.requestId().equals(rid) && s.label().equals(label) && !isSink(step, ctx, s)) {
                n += s.span();
            }
        }
        return n;
    }
}
