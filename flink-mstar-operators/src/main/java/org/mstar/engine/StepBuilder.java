package org.mstar.engine;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

/**
 * Turns the scheduler's rows into the step the resources admit: one segment per row, the prompts the sampler
 * has not yet seen, the sampling rows; a decode-only step under decode graphs is padded to its bucket with
 * padding rows (negative ids, after the real ones) that route, address and commit nothing.
 */
final class StepBuilder {
    private final LlamaModel model;
    /** Null unless decode graphs are on. */
    private final DecodeGraphs graphs;

    StepBuilder(LlamaModel model, DecodeGraphs graphs) {
        this.model = model;
        this.graphs = graphs;
    }

    PlannedStep build(List<BatchRow> rows) {
        return new PlannedStep(rows, declare(rows), feed(rows), sampleRows(rows),
                rows.stream().filter(BatchRow::samples).map(b -> b.request().id()).toList());
    }

    /** The step the resources see for {@code rows}; needs no token values, so a step can be declared ahead. */
    SubmoduleStep declare(List<BatchRow> rows) {
        List<Segment> segments = new ArrayList<>(rows.size());
        Map<String, int[]> prompts = new HashMap<>();
        Set<String> sampled = new HashSet<>();
        List<String> rids = new ArrayList<>(rows.size());
        for (BatchRow row : rows) {
            segments.add(new Segment(row.request().id(), Segment.MAIN, row.span()));
            rids.add(row.request().id());
            if (!row.request().promptTracked) {
                prompts.put(row.request().id(), row.request().prompt);
            }
            if (row.samples()) {
                sampled.add(row.request().id());
            }
        }
        int bucket = decodeBucket(rows);
        List<String> padded = new ArrayList<>(rids);
        for (int i = rows.size(); i < bucket; i++) {
            String pad = Integer.toString(rows.size() - i - 1);
            segments.add(new Segment(pad, Segment.MAIN, 1));
            padded.add(pad);
        }
        SubmoduleStep step = model.declareStep(segments, prompts, sampled);
        StepContext ctx = new StepContext(rids, LlamaModel.WALK, 0, false);
        if (bucket > 0) {
            ctx.setPaddedRequestIds(padded);
            ctx.setSlotLease(DecodeGraphs.lease(bucket));
        }
        step.setCtx(ctx);
        return step;
    }

    private static int[] feed(List<BatchRow> rows) {
        int[] tokens = new int[rows.stream().mapToInt(BatchRow::span).sum()];
        int at = 0;
        for (BatchRow row : rows) {
            System.arraycopy(row.tokens(), 0, tokens, at, row.span());
            at += row.span();
        }
        return tokens;
    }

    private static int[] sampleRows(List<BatchRow> rows) {
        return java.util.stream.IntStream.range(0, rows.size()).filter(i -> rows.get(i).samples()).toArray();
    }

    /** The graph bucket of a batch of single-token sampling rows; 0 when the step runs eagerly. */
    private int decodeBucket(List<BatchRow> rows) {
        if (graphs == null || rows.stream().anyMatch(r -> r.span() != 1 || !r.samples())) {
            return 0;
        }
        return graphs.bucketFor(rows.size());
    }
}
