package org.mstar.resources.attn;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.StaticIntBuffers;
import org.mstar.resources.SlotLease;
import org.mstar.resources.kv.SequenceView;

/**
 * One step's cross-attention metadata: per query plan label, a device {@link PagedAttentionPlan} whose
 * sequences are the label's query rows and whose pages are each row's context stream, with no mask (every
 * query sees the whole context). Built once per step by {@link CrossAttentionManager#plan}, read by every
 * layer.
 */
public final class CrossAttentionPlan {
    private final Map<String, LabelPlan> byLabel;

    private CrossAttentionPlan(Map<String, LabelPlan> byLabel) {
        this.byLabel = Collections.unmodifiableMap(byLabel);
    }

    /** One query row: {@code queries} new tokens of {@code requestId} attending {@code context} (null: none). */
    record QueryRow(String requestId, int queries, SequenceView context) {}

    /**
     * Uploads each label's page tables once. Eager: fresh tensors of the step's sizes. Leased: the static
     * buffers of (bucket, slot, label), sized on first use for {@code maxContextLen} tokens a row.
     */
    static CrossAttentionPlan build(Map<String, List<QueryRow>> rowsByLabel, int pageSize, float smScale,
                                    Device device, SlotLease lease, StaticIntBuffers statics, int maxContextLen) {
        boolean leased = PlanUpload.leased(lease);
        Map<String, LabelPlan> byLabel = new LinkedHashMap<>();
        rowsByLabel.forEach((label, rows) -> {
            PlanUpload upload = PlanUpload.of("cross-attention", label, device, lease, statics);
            byLabel.put(label, LabelPlan.build(rows, pageSize, smScale, upload, !leased, maxContextLen));
        });
        return new CrossAttentionPlan(byLabel);
    }

    /** The query plan labels, in packing order. */
    public Set<String> labels() {
        return byLabel.keySet();
    }

    /** The kernel's plan for {@code planLabel}. */
    public PagedAttentionPlan paged(String planLabel) {
        return label(planLabel).paged;
    }

    /** The request of each query row of {@code planLabel}, in packing order. */
    public List<String> requestIds(String planLabel) {
        return label(planLabel).requestIds;
    }

    LabelPlan label(String planLabel) {
        LabelPlan p = byLabel.get(planLabel);
        if (p == null) {
            throw new IllegalArgumentException("no cross-attention planned for query label '" + planLabel
                    + "'; planned: " + byLabel.keySet());
        }
        return p;
    }

    /** Returns the step's own device tensors; call once no enqueued layer reads them any more. */
    void close() {
        byLabel.values().forEach(LabelPlan::close);
    }

    record LabelPlan(PagedAttentionPlan paged, List<String> requestIds, boolean fresh) {
        static LabelPlan build(List<QueryRow> rows, int pageSize, float smScale, PlanUpload upload, boolean fresh,
                               int maxContextLen) {
            int n = rows.size();
            int[] qo = new int[n + 1];
            int[] kv = new int[n + 1];
            int[] last = new int[n];
            List<int[]> pages = new ArrayList<>(n);
            List<String> rids = new ArrayList<>(n);
            int maxQo = 0;
            int maxKv = 0;
            for (int r = 0; r < n; r++) {
                QueryRow row = rows.get(r);
                SequenceView c = row.context();
                // no context (a padding row, or its sink view): no pages, so the kernel writes zeros for its queries
                int[] p = c == null || c.length() == 0 || c.sink() ? new int[0] : c.pageIdxs();
                qo[r + 1] = qo[r] + row.queries();
                kv[r + 1] = kv[r] + p.length;
                last[r] = p.length == 0 ? 1 : c.lastPageLen(pageSize);
                pages.add(p);
                rids.add(row.requestId());
                maxQo = Math.max(maxQo, row.queries());
                maxKv = Math.max(maxKv, p.length == 0 ? 0 : c.length());
            }
            int[] indices = new int[kv[n]];
            for (int r = 0; r < n; r++) {
                System.arraycopy(pages.get(r), 0, indices, kv[r], pages.get(r).length);
            }
            if (!fresh) {
                // a captured graph keeps the grid this bound sizes, so it covers any step
                maxKv = Math.max(maxKv, maxContextLen);
            }
            int pagesPerRow = (maxContextLen + pageSize - 1) / pageSize;
            PagedAttentionPlan paged = new PagedAttentionPlan(n,
                    upload.apply("qoIndptr", n + 1, qo),
                    upload.apply("kvIndptr", n + 1, kv),
                    upload.apply("kvIndices", Math.max(1, n * pagesPerRow), indices),
                    upload.apply("lastPageLen", Math.max(1, n), last),
                    pageSize, qo[n], maxQo, maxKv, false, -1, false, smScale);
            return new LabelPlan(paged, List.copyOf(rids), fresh);
        }

        void close() {
            if (!fresh) {
                return;
            }
            paged.closeIndexTensors();
        }
    }
}
