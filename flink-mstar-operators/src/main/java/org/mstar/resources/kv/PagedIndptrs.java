package org.mstar.resources.kv;

import java.util.List;

/**
 * Host page-table arrays for one plan label, in FlashInfer's layout: {@code qoIndptr} = cumulative
 * toCompute (rows + 1 entries), {@code kvIndptr} = cumulative page counts, {@code kvIndices} = the
 * concatenated page lists, {@code lastPageLen} ∈ [1, pageSize], {@code kvLens} = resident lengths.
 */
public record PagedIndptrs(int[] qoIndptr, int[] kvIndptr, int[] kvIndices, int[] lastPageLen, int[] kvLens) {

    public int rows() {
        return qoIndptr.length - 1;
    }

    public int totalQo() {
        return qoIndptr[qoIndptr.length - 1];
    }

    /** Build the arrays from views in order. */
    public static PagedIndptrs of(List<SequenceView> views, int pageSize) {
        int n = views.size();
        int[] qo = new int[n + 1];
        int[] kv = new int[n + 1];
        int[] last = new int[n];
        int[] lens = new int[n];
        for (int i = 0; i < n; i++) {
            SequenceView v = views.get(i);
            qo[i + 1] = qo[i] + v.toCompute();
            kv[i + 1] = kv[i] + v.numPages();
            last[i] = v.lastPageLen(pageSize);
            lens[i] = v.numPages() == 0 ? 0 : (v.numPages() - 1) * pageSize + last[i];
        }
        int[] indices = new int[kv[n]];
        for (int i = 0; i < n; i++) {
            System.arraycopy(views.get(i).pageIdxs(), 0, indices, kv[i], views.get(i).numPages());
        }
        return new PagedIndptrs(qo, kv, indices, last, lens);
    }
}
