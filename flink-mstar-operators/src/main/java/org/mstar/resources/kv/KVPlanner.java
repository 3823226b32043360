package org.mstar.resources.kv;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.KVStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;

/**
 * Builds what attention and positions read from an admitted step: per plan label, one
 * {@link SequenceView} per segment, the page-table arrays, and the write address of every new token.
 */
final class KVPlanner {
    private KVPlanner() {}

    static KVPlanOutputs plan(KVState st, KVStep step, StepContext ctx, List<String> forkRows) {
        Map<String, KVPlanOutput> byLabel = new LinkedHashMap<>();
        groupByPlanLabel(step).forEach((planLabel, segs) -> byLabel.put(planLabel, planLabel(st, step, ctx, planLabel, segs)));
        return new KVPlanOutputs(Collections.unmodifiableMap(byLabel), step.preForks(), step.postForks(),
                List.copyOf(forkRows));
    }

    /**
     * Segments by plan label. A combined plan label takes its source labels label-major: every segment
     * of the first source in batch order, then the second's, and so on; every source must have
     * segments. Other labels plan under their own name in batch order. Plan labels are ordered by their
     * first segment in the batch.
     */
    static Map<String, List<Segment>> groupByPlanLabel(KVStep step) {
        Map<String, String> planOf = new HashMap<>();
        Map<String, List<String>> sourcesOf = new HashMap<>();
        step.combinedLabels().forEach((sources, planLabel) -> {
            for (String src : sources) {
                if (planOf.put(src, planLabel) != null) {
                    throw new IllegalArgumentException("label '" + src + "' is a source of two combined plan labels");
                }
            }
            sourcesOf.put(planLabel, sources);
        });
        Map<String, List<Segment>> groups = new LinkedHashMap<>();
        for (Segment seg : step.segments()) {
            String planLabel = planOf.getOrDefault(seg.label(), seg.label());
            groups.computeIfAbsent(planLabel, k -> new ArrayList<>());
            if (!sourcesOf.containsKey(planLabel)) {
                groups.get(planLabel).add(seg);
            }
        }
        sourcesOf.forEach((planLabel, sources) -> {
            List<Segment> ordered = new ArrayList<>();
            for (String src : sources) {
                int before = ordered.size();
                step.segments().stream().filter(s -> s.label().equals(src)).forEach(ordered::add);
                if (ordered.size() == before) {
                    throw new IllegalArgumentException("combined plan label '" + planLabel + "' names source label '"
                            + src + "', which has no segments in this step");
                }
            }
            groups.put(planLabel, ordered);
        });
        return groups;
    }

    private static KVPlanOutput planLabel(KVState st, KVStep step, StepContext ctx, String planLabel, List<Segment> segs) {
        int ps = st.pageSize;
        List<SequenceView> views = new ArrayList<>(segs.size());
        int newTokens = 0;
        for (Segment seg : segs) {
            views.add(view(st, seg, StepRows.isSink(step, ctx, seg)));
            newTokens += seg.span();
        }
        int[] pages = new int[newTokens];
        int[] offsets = new int[newTokens];
        int t = 0;
        for (SequenceView v : views) {
            for (int p = v.length() - v.toCompute(); p < v.length(); p++, t++) {
                pages[t] = v.sink() ? PageArena.SINK_PAGE : v.pageIdxs()[p / ps];
                offsets[t] = p % ps;
            }
        }
        return new KVPlanOutput(planLabel, ps, views, PagedIndptrs.of(views, ps), pages, offsets);
    }

    /**
     * {@code length = storedLen + span} on the stream's first {@code ceil(length / pageSize)} pages. A
     * sink row reads whatever pages its stream has (none for a padding row) and the sink page past them.
     */
    private static SequenceView view(KVState st, Segment seg, boolean sink) {
        CacheStream s = st.stream(seg.requestId(), seg.label());
        int length = (s == null ? 0 : s.storedLen) + seg.span();
        int numPages = st.pagesFor(length);
        int[] pageIdxs = new int[numPages];
        int held = s == null ? 0 : Math.min(numPages, s.pages.size());
        if (!sink && held < numPages) {
            throw new IllegalStateException("stream " + seg.label() + " of '" + seg.requestId() + "' holds " + held
                    + " pages, its view needs " + numPages + ": was the step admitted?");
        }
        for (int i = 0; i < held; i++) {
            pageIdxs[i] = s.pages.get(i);
        }
        Arrays.fill(pageIdxs, held, numPages, PageArena.SINK_PAGE);
        return new SequenceView(seg.requestId(), seg.label(), length, seg.span(), pageIdxs,
                s == null ? 0 : s.generation, sink);
    }
}
