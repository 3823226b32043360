package org.mstar.resources.attn;

import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.mstar.device.Device;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.StaticIntBuffers;
import org.mstar.device.Tensor;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.SlotLease;
import org.mstar.resources.kv.KVPlanOutput;
import org.mstar.resources.kv.KVPlanOutputs;
import org.mstar.resources.kv.PagedIndptrs;

/**
 * One step's attention metadata: per KV plan label, the device {@link PagedAttentionPlan} the kernel
 * reads and the query rows holding each sequence's last token. Built once per step by
 * {@link AttentionManager#plan}, read by every layer.
 */
public final class AttentionPlan {
    private final Map<String, LabelPlan> byLabel;
    /** Each label's {@link LatentPrefillPlan} once asked for (empty: the step is not one for it). */
    private final Map<String, Optional<LatentPrefillPlan>> latentPrefill = new HashMap<>();

    private AttentionPlan(Map<String, LabelPlan> byLabel) {
        this.byLabel = Collections.unmodifiableMap(byLabel);
    }

    /**
     * Uploads each label's host page tables once; every layer of the step reuses them. Eager (no lease, or
     * a lease without a captured bucket): fresh tensors of exactly the step's sizes. Leased: the static
     * buffers of (bucket, slot, label), sized on first use ({@code kvIndices} for {@code maxSeqLen} tokens
     * per sequence) and overwritten in place, so a captured replay reads this step's tables.
     */
    static AttentionPlan build(KVPlanOutputs kv, AttentionStep step, int windowLeft, float smScale, Device device,
                               SlotLease lease, StaticIntBuffers statics, int maxSeqLen) {
        boolean leased = PlanUpload.leased(lease);
        Map<String, LabelPlan> byLabel = new LinkedHashMap<>();
        kv.byLabel().forEach((label, out) -> {
            PlanUpload upload = PlanUpload.of("attention", label, device, lease, statics);
            byLabel.put(label, LabelPlan.build(out, step, windowLeft, smScale, upload, !leased, maxSeqLen));
        });
        return new AttentionPlan(byLabel);
    }

    /** The plan labels, in KV's packing order. */
    public Set<String> labels() {
        return byLabel.keySet();
    }

    /** The kernel's plan for {@code planLabel}. */
    public PagedAttentionPlan paged(String planLabel) {
        return label(planLabel).paged;
    }

    /**
     * Per sequence of {@code planLabel}, the query row of its last new token: {@code qoIndptr[r+1] - 1}.
     * A sequence computing no token this step has no such row and gets -1.
     */
    public int[] lastRows(String planLabel) {
        return label(planLabel).lastRows.clone();
    }

    /** The device copy of {@link #lastRows}; null when some sequence computes no token. */
    Tensor lastRowsTensor(String planLabel) {
        return label(planLabel).lastRowsDevice;
    }

    LabelPlan label(String planLabel) {
        LabelPlan p = byLabel.get(planLabel);
        if (p == null) {
            throw new IllegalArgumentException("no attention planned for label '" + planLabel + "'; planned: "
                    + byLabel.keySet());
        }
        return p;
    }

    /**
     * {@code planLabel}'s step attended over up-projected keys, built on first use and freed with this plan; null when
     * the step is not one for it ({@link LatentPrefillPlan#of}) or its tables are a captured graph's.
     */
    LatentPrefillPlan latentPrefill(String planLabel, Device device) {
        return latentPrefill.computeIfAbsent(planLabel, l -> {
            LabelPlan p = label(l);
            return Optional.ofNullable(p.fresh() ? LatentPrefillPlan.of(p.paged(), p.host(), device) : null);
        }).orElse(null);
    }

    /** Returns the step's device tensors; call once no enqueued layer reads them any more. */
    void close() {
        byLabel.values().forEach(LabelPlan::close);
        latentPrefill.values().forEach(p -> p.ifPresent(LatentPrefillPlan::close));
        latentPrefill.clear();
    }

    /**
     * @param host  the page tables the device tensors were uploaded from
     * @param fresh whether the tensors are this plan's own (freed with it) rather than static buffers
     */
    record LabelPlan(PagedAttentionPlan paged, PagedIndptrs host, int[] lastRows, Tensor lastRowsDevice,
                     boolean fresh) {
        static LabelPlan build(KVPlanOutput out, AttentionStep step, int windowLeft, float smScale, PlanUpload upload,
                               boolean fresh, int maxSeqLen) {
            PagedIndptrs ip = out.indptrs();
            int rows = ip.rows();
            int[] qo = ip.qoIndptr();
            int maxQoLen = 0;
            int maxKvLen = 0;
            boolean everyRowComputes = true;
            int[] lastRows = new int[rows];
            for (int r = 0; r < rows; r++) {
                int qLen = qo[r + 1] - qo[r];
                maxQoLen = Math.max(maxQoLen, qLen);
                maxKvLen = Math.max(maxKvLen, ip.kvLens()[r]);
                lastRows[r] = qLen > 0 ? qo[r + 1] - 1 : -1;
                everyRowComputes &= qLen > 0;
            }
            if (!fresh) {
                // a captured graph keeps the grid this bound sizes (decode splits), so it covers any step
                maxKvLen = Math.max(maxKvLen, maxSeqLen);
            }
            int pagesPerRow = (maxSeqLen + out.pageSize() - 1) / out.pageSize();
            PagedAttentionPlan paged = new PagedAttentionPlan(rows,
                    upload.apply("qoIndptr", rows + 1, qo),
                    upload.apply("kvIndptr", rows + 1, ip.kvIndptr()),
                    upload.apply("kvIndices", rows * pagesPerRow, ip.kvIndices()),
                    upload.apply("lastPageLen", rows, ip.lastPageLen()),
                    out.pageSize(), ip.totalQo(), maxQoLen, maxKvLen, step.causal(), windowLeft, step.contextOnly(),
                    smScale);
            Tensor lastRowsDevice = everyRowComputes ? upload.apply("lastRows", rows, lastRows) : null;
            return new LabelPlan(paged, ip, lastRows, lastRowsDevice, fresh);
        }

        void close() {
            if (!fresh) {
                return;
            }
            paged.closeIndexTensors();
            if (lastRowsDevice != null) {
                lastRowsDevice.close();
            }
        }
    }
}
