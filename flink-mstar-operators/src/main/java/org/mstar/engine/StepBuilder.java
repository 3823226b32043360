package org.mstar.engine;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;

/**
 * Turns the scheduler's rows into the step the resources admit: one segment per row, the prompts the sampler
 * has not yet seen, the sampling rows; a decode-only step under decode graphs is padded to its bucket with
 * padding rows (negative ids, after the real ones) that route, address and commit nothing.
 */
final class StepBuilder {
    private final ModelRunner model;
    /** Null unless decode graphs are on. */
    private final DecodeGraphs graphs;

    StepBuilder(ModelRunner model, DecodeGraphs graphs) {
        this.model = model;
        this.graphs = graphs;
    }

    /**
     * The step of {@code rows}; {@code declared} is the step the resources see when it was declared ahead (the
     * pre-planned one), else null and it is declared now.
     */
    PlannedStep build(List<BatchRow> rows, SubmoduleStep declared) {
        return build(rows, declared, feed(rows));
    }

    /**
     * The step of decode {@code rows} declared ahead as {@code declared}, launched before the host has the tokens
     * it feeds: the device copies them from the draw before.
     */
    PlannedStep buildFedOnDevice(List<BatchRow> rows, SubmoduleStep declared) {
        return build(rows, declared, null);
    }

    private PlannedStep build(List<BatchRow> rows, SubmoduleStep declared, int[] tokens) {
        ModelRequest.Yield[] yields = new ModelRequest.Yield[rows.size()];
        int sampling = 0;
        for (int i = 0; i < yields.length; i++) {
            BatchRow row = rows.get(i);
            yields[i] = row.samples() ? row.request().yieldAtEnd() : ModelRequest.Yield.NOTHING;
            sampling += yields[i] == ModelRequest.Yield.TOKEN ? 1 : 0;
        }
        int[] sampleRows = new int[sampling];
        List<String> sampleRids = new ArrayList<>(sampling);
        int[] logitsRows = new int[(int) Arrays.stream(yields).filter(y -> y == ModelRequest.Yield.LOGITS).count()];
        for (int i = 0, s = 0, l = 0; i < yields.length; i++) {
            if (yields[i] == ModelRequest.Yield.TOKEN) {
                sampleRows[s++] = i;
                sampleRids.add(rows.get(i).request().id());
            } else if (yields[i] == ModelRequest.Yield.LOGITS) {
                logitsRows[l++] = i;
            }
        }
        return new PlannedStep(rows, declared != null ? declared : declare(rows), tokens, sampleRows,
                Collections.unmodifiableList(sampleRids), logitsRows, starting(rows));
    }

    /** The programs of the rows that start a sequence: their step writes the model state too. */
    private static List<ModelRequest> starting(List<BatchRow> rows) {
        List<ModelRequest> starting = new ArrayList<>();
        for (BatchRow row : rows) {
            if (startsSequence(row)) {
                starting.add(row.request().program);
            }
        }
        return starting;
    }

    private static boolean startsSequence(BatchRow row) {
        return row.request().program != null && row.start() == 0;
    }

    /** The step the resources see for {@code rows}; needs no token values, so a step can be declared ahead. */
    SubmoduleStep declare(List<BatchRow> rows) {
        List<Segment> segments = new ArrayList<>(rows.size());
        Map<String, int[]> prompts = new HashMap<>();
        Set<String> sampled = new HashSet<>();
        List<String> rids = new ArrayList<>(rows.size());
        List<String> starting = new ArrayList<>();
        for (BatchRow row : rows) {
            if (startsSequence(row)) {
                starting.add(row.request().id());
            }
            segments.add(new Segment(row.request().id(), Segment.MAIN, row.span()));
            rids.add(row.request().id());
            if (!row.request().promptTracked) {
                prompts.put(row.request().id(), row.request().prompt);
            }
            if (row.samples() && row.request().yieldAtEnd() == ModelRequest.Yield.TOKEN) {
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
        SubmoduleStep step = model.declareStep(segments, starting, prompts, sampled);
        StepContext ctx = new StepContext(rids, model.keys().walk(), 0, false);
        if (bucket > 0) {
            ctx.setPaddedRequestIds(padded);
            ctx.setSlotLease(DecodeGraphs.lease(model.keys().walk(), bucket));
        }
        step.setCtx(ctx);
        return step;
    }

    private static int[] feed(List<BatchRow> rows) {
        int total = 0;
        for (BatchRow row : rows) {
            total += row.span();
        }
        int[] tokens = new int[total];
        int at = 0;
        for (BatchRow row : rows) {
            for (int i = row.start(); i < row.start() + row.span(); i++) {
                tokens[at++] = row.request().tokenAt(i); // no copy per row: a decode step feeds one token each
            }
        }
        return tokens;
    }

    /**
     * The graph bucket of a batch of single-token rows that draw a token and write no model state; 0 when the
     * step runs eagerly.
     */
    private int decodeBucket(List<BatchRow> rows) {
        if (graphs == null || rows.stream().anyMatch(r -> r.span() != 1 || !r.samples() || startsSequence(r)
                || r.request().yieldAtEnd() != ModelRequest.Yield.TOKEN)) {
            return 0;
        }
        return graphs.bucketFor(rows.size());
    }
}
