package org.mstar.resources.attn;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.mstar.device.PagedAttentionPlan;
import org.mstar.device.RaggedAttentionPlan;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.kv.PagedIndptrs;

/** Which latent steps take the up-projected prefill form, and the key rows and ragged plan they get. */
class LatentPrefillPlanTest {
    private static final int PAGE = 4;

    /** A paged plan's masks over the given host tables (its device tensors are not read). */
    private static PagedAttentionPlan paged(PagedIndptrs host, boolean causal, int windowLeft, boolean contextOnly) {
        return new PagedAttentionPlan(host.rows(), null, null, null, null, PAGE, host.totalQo(), 0, 0, causal,
                windowLeft, contextOnly, 0.125f);
    }

    /** Sequences of qLens new tokens over kvLens keys, on the pages listed per sequence. */
    private static PagedIndptrs tables(int[] qLens, int[] kvLens, int[][] pages) {
        int n = qLens.length;
        int[] qo = new int[n + 1];
        int[] kv = new int[n + 1];
        int[] last = new int[n];
        int total = 0;
        for (int[] p : pages) {
            total += p.length;
        }
        int[] indices = new int[total];
        for (int r = 0; r < n; r++) {
            qo[r + 1] = qo[r] + qLens[r];
            kv[r + 1] = kv[r] + pages[r].length;
            System.arraycopy(pages[r], 0, indices, kv[r], pages[r].length);
            last[r] = kvLens[r] - (pages[r].length - 1) * PAGE;
        }
        return new PagedIndptrs(qo, kv, indices, last, kvLens);
    }

    @Test
    void freshPromptsGatherTheirKeysInSequenceOrderAndAttendCausally() {
        // a 5-token prompt on pages 7 and 3, a sequence computing nothing this step, a 2-token prompt on page 9
        PagedIndptrs host = tables(new int[] {5, 0, 2}, new int[] {5, 9, 2}, new int[][] {{7, 3}, {1, 2, 4}, {9}});
        try (CpuDevice cpu = new CpuDevice(); LatentPrefillPlan plan = LatentPrefillPlan.of(paged(host, true, -1, false),
                host, cpu)) {
            assertThat(plan).isNotNull();
            assertThat(plan.keys()).isEqualTo(7);
            assertThat(cpu.toInts(plan.keyRows())).containsExactly(28, 29, 30, 31, 12, 36, 37);
            RaggedAttentionPlan a = plan.attention();
            assertThat(cpu.toInts(a.qIndptr())).containsExactly(0, 5, 5, 7);
            assertThat(cpu.toInts(a.kvIndptr())).containsExactly(0, 5, 5, 7);
            assertThat(a.causalBlock()).isEqualTo(RaggedAttentionPlan.CAUSAL);
            assertThat(a.smScale()).isEqualTo(0.125f);
            assertThat(a.maxQLen()).isEqualTo(5);
            assertThat(a.maxKvLen()).isEqualTo(5);
        }
    }

    @Test
    void takesPromptsOverShortCachedPrefixesUpToAQuarterMoreKeysThanRows() {
        try (CpuDevice cpu = new CpuDevice()) {
            // 8 new tokens over 2 cached: 10 keys for 8 rows
            PagedIndptrs quarter = tables(new int[] {8}, new int[] {10}, new int[][] {{0, 1, 2}});
            try (LatentPrefillPlan plan = LatentPrefillPlan.of(paged(quarter, true, -1, false), quarter, cpu)) {
                assertThat(plan).isNotNull();
            }
            // one more cached key is past the quarter
            PagedIndptrs past = tables(new int[] {8}, new int[] {11}, new int[][] {{0, 1, 2}});
            assertThat(LatentPrefillPlan.of(paged(past, true, -1, false), past, cpu)).isNull();
        }
    }

    @Test
    void decodeRowsOverLongContextsAndMasksTheRaggedPlanLacksKeepTheLatentForm() {
        try (CpuDevice cpu = new CpuDevice()) {
            PagedIndptrs decode = tables(new int[] {1, 1}, new int[] {9, 5}, new int[][] {{0, 1, 2}, {3, 4}});
            assertThat(LatentPrefillPlan.of(paged(decode, true, -1, false), decode, cpu)).isNull();
            PagedIndptrs prompt = tables(new int[] {6}, new int[] {6}, new int[][] {{0, 1}});
            assertThat(LatentPrefillPlan.of(paged(prompt, true, 3, false), prompt, cpu)).isNull();
            assertThat(LatentPrefillPlan.of(paged(prompt, true, -1, true), prompt, cpu)).isNull();
            assertThat(LatentPrefillPlan.of(paged(prompt, false, -1, false), prompt, cpu)).isNull();
        }
    }
}
