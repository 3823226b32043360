package org.mstar.resources;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.resources.kv.KVPlanOutput;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.PagedIndptrs;
import org.mstar.resources.kv.SequenceView;

/**
 * Hand-built KV plans for tests of the resources that read one (positions, attention), laid out as the
 * KV manager lays them out: views per plan label in packing order, page tables, write addresses.
 */
public final class KVPlanFixture {
    private final int pageSize;
    private final Map<String, List<SequenceView>> views = new LinkedHashMap<>();
    private final List<Fork> preForks = new ArrayList<>();
    private final List<Fork> postForks = new ArrayList<>();
    private List<String> forkRids;
    private int nextPage = 1; // page 0 is the sink

    private KVPlanFixture(int pageSize) {
        this.pageSize = pageSize;
    }

    public static KVPlanFixture pageSize(int pageSize) {
        return new KVPlanFixture(pageSize);
    }

    /** A view of {@code stored + span} tokens on fresh pages, {@code span} of them new. */
    public KVPlanFixture view(String planLabel, String rid, String label, int stored, int span) {
        int length = stored + span;
        int[] pages = new int[(length + pageSize - 1) / pageSize];
        for (int i = 0; i < pages.length; i++) {
            pages[i] = nextPage++;
        }
        return view(planLabel, new SequenceView(rid, label, length, span, pages, 0, false));
    }

    /** A sink row: {@code span} new tokens addressed to the sink page, nothing resident. */
    public KVPlanFixture sinkView(String planLabel, String rid, String label, int span) {
        return view(planLabel, new SequenceView(rid, label, span, span, new int[] {0}, 0, true));
    }

    public KVPlanFixture view(String planLabel, SequenceView v) {
        views.computeIfAbsent(planLabel, l -> new ArrayList<>()).add(v);
        return this;
    }

    public KVPlanFixture preFork(String from, String to) {
        preForks.add(new Fork(from, to));
        return this;
    }

    public KVPlanFixture postFork(String from, String to) {
        postForks.add(new Fork(from, to));
        return this;
    }

    public KVPlanFixture forkRids(String... rids) {
        forkRids = List.of(rids);
        return this;
    }

    public KVPlanOutputs build() {
        Map<String, KVPlanOutput> byLabel = new LinkedHashMap<>();
        views.forEach((label, vs) -> {
            PagedIndptrs ip = PagedIndptrs.of(vs, pageSize);
            int[] pages = new int[ip.totalQo()];
            int[] offsets = new int[ip.totalQo()];
            int at = 0;
            for (SequenceView v : vs) {
                for (int p = v.length() - v.toCompute(); p < v.length(); p++, at++) {
                    pages[at] = v.sink() ? 0 : v.pageIdxs()[p / pageSize];
                    offsets[at] = v.sink() ? 0 : p % pageSize;
                }
            }
            byLabel.put(label, new KVPlanOutput(label, pageSize, vs, ip, pages, offsets));
        });
        return new KVPlanOutputs(byLabel, List.copyOf(preForks), List.copyOf(postForks), forkRids);
    }
}
