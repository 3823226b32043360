package org.mstar.resources.attn;

import org.mstar.device.Device;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.Tensor;
import org.mstar.resources.kv.PagedIndptrs;

/**
 * A latent (MLA) step attended over up-projected keys instead of in the latent space: the pool rows of every key the
 * step's sequences see, in sequence order ({@code keyRows}, I32 indices into a layer's {@code [pages · pageSize]}
 * latent rows, for a gather), and the ragged causal plan over them (each sequence's queries at the end of its keys).
 * Worth it when the keys are few against the queries: {@link #of} takes a step of new prompts whose keys are at
 * most a quarter more than its query rows (prompts with short cached prefixes; no decode rows over long contexts),
 * whose up-projected keys and values then take no more memory than the latent form's temporaries of the same rows
 * (about 16 KB a key against 38 KB a query row a layer at DeepSeek-V2's widths in bf16), so the engine's measured
 * activation reserve holds either; it refuses masks the ragged plan does not express (a window, context-only).
 */
public record LatentPrefillPlan(RaggedAttentionPlan attention, Tensor keyRows) implements AutoCloseable {

    /** The plan of {@code paged}'s step from its page tables {@code host}, or null when the step is not one for it. */
    static LatentPrefillPlan of(PagedAttentionPlan paged, PagedIndptrs host, Device device) {
        if (!paged.causal() || paged.contextOnly() || paged.windowLeft() >= 0 || host.totalQo() == 0) {
            // a sequence with query rows has at least as many keys, so a step with rows has keys to gather
            return null;
        }
        int[] qo = host.qoIndptr();
        int[] kvLens = host.kvLens();
        long keys = 0;
        for (int r = 0; r < host.rows(); r++) {
            keys += qo[r + 1] > qo[r] ? kvLens[r] : 0;
        }
        if (4 * keys > 5L * host.totalQo()) {
            return null;
        }
        int pageSize = paged.pageSize();
        int[] rows = new int[(int) keys];
        int[] qIndptr = new int[host.rows() + 1];
        int[] kvIndptr = new int[host.rows() + 1];
        int maxQ = 0;
        int maxKv = 0;
        int at = 0;
        for (int r = 0; r < host.rows(); r++) {
            int qLen = qo[r + 1] - qo[r];
            int kvLen = qLen > 0 ? kvLens[r] : 0;
            for (int j = 0; j < kvLen; j++) {
                rows[at++] = host.kvIndices()[host.kvIndptr()[r] + j / pageSize] * pageSize + j % pageSize;
            }
            qIndptr[r + 1] = qo[r + 1];
            kvIndptr[r + 1] = at;
            maxQ = Math.max(maxQ, qLen);
            maxKv = Math.max(maxKv, kvLen);
        }
        Tensor q = device.fromInts(qIndptr, qIndptr.length);
        Tensor kv = device.fromInts(kvIndptr, kvIndptr.length);
        RaggedAttentionPlan attention = new RaggedAttentionPlan(host.rows(), q, kv, host.totalQo(), at, maxQ, maxKv,
                RaggedAttentionPlan.CAUSAL, paged.smScale());
        return new LatentPrefillPlan(attention, device.fromInts(rows, rows.length));
    }

    /** Keys of the step's sequences (rows of the gather). */
    public int keys() {
        return attention.totalKv();
    }

    @Override
    public void close() {
        attention.qIndptr().close();
        attention.kvIndptr().close();
        keyRows.close();
    }
}
