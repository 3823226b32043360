package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.ctx;
import static org.mstar.resources.kv.KvHarness.keyed;
import static org.mstar.resources.kv.KvHarness.range;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.KVStep;
import org.mstar.resources.Offload;
import org.mstar.resources.RequestOffloading;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

class KVManagerOffloadTest {

    private static KvHarness withHost(int pages, int hostPages) {
        return new KvHarness(KvHarness.config(pages, 4).cpuOffloadPages(hostPages).build(), null);
    }

    @Test
    void offloadAndReloadRestoreLengthsAndBytes() {
        KvHarness h = withHost(16, 8);
        h.kv.ingestRequest("a", null);
        StreamLabel main = new StreamLabel("a", "main");
        RetentionPolicy policy = new RetentionPolicy(4, 3);
        for (int i = 0; i < 4; i++) {
            KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 3))).retention(Map.of(main, policy)).build();
            h.run(s, ctx(List.of("a"), PREFILL), Map.of(main, range(10 * i, 3)));
        }
        h.extend("cfg", 500, Map.of("a", 5));
        CacheStream s = h.stream("a", "main");
        int stored = s.storedLen;
        int released = s.released;
        assertThat(released).isPositive();
        int free = h.free();
        assertThat(h.kv.capability(Offload.class)).isPresent();
        int reclaimable = h.kv.reclaimable("a");
        assertThat(reclaimable).isEqualTo(s.pages.size() + 2);

        assertThat(h.kv.offload("a")).isEqualTo(reclaimable);
        assertThat(h.kv.isOffloaded("a")).isTrue();
        assertThat(h.kv.reclaimable("a")).isZero();
        assertThat(h.kv.offload("a")).isZero();
        assertThat(h.free()).isEqualTo(free + reclaimable);
        h.kv.assertPagesConserved();

        KVStep next = KVStep.builder().segments(List.of(new Segment("a", "main", 1))).build();
        AdmitOutcome o = h.kv.admit(next, ctx(List.of("a"), PREFILL));
        assertThat(o.reason()).isInstanceOf(RequestOffloading.class);
        assertThat(h.free()).isEqualTo(free + reclaimable);

        assertThat(h.kv.canReload("a")).isTrue();
        assertThat(h.kv.reload("a")).isTrue();
        assertThat(h.kv.isOffloaded("a")).isFalse();
        s = h.stream("a", "main");
        assertThat(s.storedLen).isEqualTo(stored);
        assertThat(s.released).isEqualTo(released);
        assertThat(s.protectedPrefix).isEqualTo(3);
        h.verifyAll();
        h.kv.assertPagesConserved();
        h.extend("main", 900, Map.of("a", 2));
        h.verifyAll();
    }

    @Test
    void aLabelTheOffloadedRequestDoesNotHaveYetWaitsForTheReload() {
        KvHarness h = withHost(16, 8);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 5));
        assertThat(h.kv.offload("a")).isPositive();
        int free = h.free();

        KVStep step = KVStep.builder().segments(List.of(new Segment("a", "aux", 2))).build();
        AdmitOutcome o = h.kv.admit(step, ctx(List.of("a"), PREFILL));

        assertThat(o.reason()).isInstanceOf(RequestOffloading.class);
        assertThat(h.stream("a", "aux")).as("no stream opened on an offloaded request").isNull();
        assertThat(h.free()).isEqualTo(free);
        h.kv.assertPagesConserved();
    }

    @Test
    void nothingMovesWhileAStepIsInFlight() {
        KvHarness h = withHost(16, 8);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 5));
        KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 1))).build();
        StepContext c = ctx(List.of("a"), PREFILL);
        h.kv.admit(s, c);
        assertThat(h.kv.reclaimable("a")).isZero();
        assertThat(h.kv.offload("a")).isZero();
        assertThat(h.kv.isOffloaded("a")).isFalse();
        h.kv.rollbackAdmit(s, c);
        assertThat(h.kv.offload("a")).isEqualTo(2);
    }

    @Test
    void reloadThatDoesNotFitChangesNothing() {
        KvHarness h = withHost(8, 8);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 12));
        assertThat(h.kv.offload("a")).isEqualTo(3);
        h.kv.ingestRequest("b", null);
        h.extend("main", 100, Map.of("b", 20));
        int free = h.free();
        assertThat(h.kv.canReload("a")).isFalse();
        assertThat(h.kv.reload("a")).isFalse();
        assertThat(h.kv.isOffloaded("a")).isTrue();
        assertThat(h.free()).isEqualTo(free);
        h.kv.assertPagesConserved();
        h.kv.removeRequest("b");
        assertThat(h.kv.reload("a")).isTrue();
        h.verify("a", "main");
        h.kv.removeRequest("a");
        h.kv.assertPagesConserved();
    }

    @Test
    void aStreamTheHostPoolCannotTakeStaysOnTheDevice() {
        KvHarness h = withHost(16, 1);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 6));
        assertThat(h.kv.offload("a")).isZero();
        assertThat(h.kv.isOffloaded("a")).isFalse();
        h.verifyAll();
    }

    @Test
    void sharedPagesComeBackAsTheRequestsOwnCopies() {
        KvHarness h = withHost(16, 8);
        h.kv.enablePrefixCache(new byte[] {1}, Set.of(PREFILL, DECODE));
        int[] prompt = range(1, 10);
        h.kv.ingestRequest("a", keyed(prompt, 4));
        h.prefill("a", prompt);
        List<Integer> before = new ArrayList<>(h.stream("a", "main").pages);
        assertThat(h.kv.offload("a")).isEqualTo(3);
        assertThat(h.st().prefix.index().evictable()).isEqualTo(2);
        assertThat(h.kv.reload("a")).isTrue();
        for (int p : h.stream("a", "main").pages) {
            assertThat(h.st().arena.numOwners(p)).isEqualTo(1);
        }
        assertThat(h.stream("a", "main").pages).doesNotContainAnyElementsOf(before.subList(0, 2));
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void withoutAHostPoolNothingIsEvictable() {
        KvHarness h = new KvHarness(16, 4);
        h.kv.ingestRequest("a", null);
        h.extend("main", 1, Map.of("a", 6));
        assertThat(h.kv.capability(Offload.class)).isEmpty();
        assertThat(h.kv.reclaimable("a")).isZero();
        assertThat(h.kv.offload("a")).isZero();
        assertThat(h.kv.reload("a")).isTrue();
    }
}
