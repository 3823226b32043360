package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.PREFILL;
import static org.mstar.resources.kv.KvHarness.ctx;
import static org.mstar.resources.kv.KvHarness.keyed;
import static org.mstar.resources.kv.KvHarness.range;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.KVReqConfig;
import org.mstar.resources.KVStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StreamLabel;

class KVManagerPrefixCacheTest {
    private static final byte[] ROOT = {1, 2, 3};
    private static final int[] PROMPT = range(1000, 12);

    private static KvHarness cached(int pages) {
        KvHarness h = new KvHarness(pages, 4);
        assertThat(h.kv.enablePrefixCache(ROOT, Set.of(PREFILL, DECODE))).isTrue();
        return h;
    }

    @Test
    void theProbeStopsOneKeyShortAndTheLeasedPagesServeTheSameBytes() {
        KvHarness h = cached(32);
        h.kv.ingestRequest("a", keyed(PROMPT, 4));
        assertThat(h.prefill("a", PROMPT)).isZero();
        assertThat(h.st().prefix.index().size()).isEqualTo(3);

        h.kv.ingestRequest("b", keyed(PROMPT, 4));
        CachedPrefix first = h.kv.resolveCachedPrefix("b", NODE, PREFILL, Map.of());
        assertThat(first.tokens()).isEqualTo(8);
        List<Integer> lease = h.stream("b", "main").lease;
        int owners = h.st().arena.numOwners(lease.get(0));
        assertThat(h.kv.resolveCachedPrefix("b", NODE, PREFILL, Map.of())).isEqualTo(first);
        assertThat(h.st().arena.numOwners(lease.get(0))).isEqualTo(owners);
        h.kv.assertPagesConserved();

        assertThat(h.prefill("b", PROMPT)).isEqualTo(8);
        assertThat(h.stream("b", "main").pages.subList(0, 2)).isEqualTo(h.stream("a", "main").pages.subList(0, 2));
        assertThat(h.stream("b", "main").pages.get(2)).isNotEqualTo(h.stream("a", "main").pages.get(2));
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void aPromptEndingInsideAPageMatchesEveryWholePage() {
        KvHarness h = cached(32);
        int[] prompt = range(5, 10);
        h.kv.ingestRequest("a", keyed(prompt, 4));
        h.prefill("a", prompt);
        assertThat(h.st().prefix.index().size()).isEqualTo(2);
        h.kv.ingestRequest("b", keyed(prompt, 4));
        assertThat(h.prefill("b", prompt)).isEqualTo(8);
        h.verifyAll();
    }

    @Test
    void theFirstWriterWinsAndLaterCopiesStayPrivate() {
        KvHarness h = cached(32);
        h.kv.ingestRequest("a", keyed(PROMPT, 4));
        h.kv.ingestRequest("c", keyed(PROMPT, 4));
        KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 12), new Segment("c", "main", 12))).build();
        h.run(s, ctx(List.of("a", "c"), PREFILL),
                Map.of(new StreamLabel("a", "main"), PROMPT, new StreamLabel("c", "main"), PROMPT));
        for (int i = 0; i < 3; i++) {
            int pa = h.stream("a", "main").pages.get(i);
            int pc = h.stream("c", "main").pages.get(i);
            assertThat(h.st().prefix.index().pages()).contains(pa).doesNotContain(pc);
            assertThat(h.st().arena.numOwners(pa)).isEqualTo(2);
            assertThat(h.st().arena.numOwners(pc)).isEqualTo(1);
            assertThat(h.st().arena.isSealed(pc)).isFalse();
        }
        h.kv.assertPagesConserved();
    }

    @Test
    void aRequestThatOptsOutOrAnUnkeyedWalkGetsNoOpinion() {
        KvHarness h = cached(32);
        KVReqConfig k = keyed(PROMPT, 4);
        h.kv.ingestRequest("x", new KVReqConfig(null, null, null, null, null, k.prefixKeys(), k.prefixTail(), null,
                false, null, null));
        assertThat(h.kv.resolveCachedPrefix("x", NODE, PREFILL, Map.of())).isNull();
        h.kv.ingestRequest("y", k);
        assertThat(h.kv.resolveCachedPrefix("y", NODE, "other-walk", Map.of())).isNull();
        h.kv.ingestRequest("z", null);
        assertThat(h.kv.resolveCachedPrefix("z", NODE, PREFILL, Map.of())).isNull();
    }

    @Test
    void aNewRootMakesEveryOldKeyUnreachable() {
        KvHarness h = cached(32);
        h.kv.ingestRequest("a", keyed(PROMPT, 4));
        h.prefill("a", PROMPT);
        assertThat(h.kv.enablePrefixCache(new byte[] {9}, Set.of(PREFILL))).isTrue();
        h.kv.ingestRequest("b", keyed(PROMPT, 4));
        assertThat(h.kv.resolveCachedPrefix("b", NODE, PREFILL, Map.of()).tokens()).isZero();
        assertThat(h.kv.fingerprint()).isEqualTo(h.kv.fingerprint());
        KvHarness salted = new KvHarness(KvHarness.config(32, 4).prefixCacheSalt("s").build(), null);
        assertThat(salted.kv.fingerprint()).isNotEqualTo(h.kv.fingerprint());
    }

    @Test
    void evictionServesALiveAllocationAndARefusalEvictsNothing() {
        KvHarness h = cached(8);
        int[] prompt = range(1, 16);
        h.kv.ingestRequest("a", keyed(prompt, 4));
        h.prefill("a", prompt);
        h.kv.removeRequest("a");
        assertThat(h.free()).isEqualTo(3);
        assertThat(h.st().prefix.index().evictable()).isEqualTo(4);

        h.kv.ingestRequest("big", null);
        KVStep tooBig = KVStep.builder().segments(List.of(new Segment("big", "main", 32))).build();
        var refused = h.kv.admit(tooBig, ctx(List.of("big"), PREFILL));
        assertThat(refused.reason()).isInstanceOfSatisfying(AllocationFailed.class,
                f -> assertThat(f.pagesShort()).isEqualTo(1));
        assertThat(h.st().prefix.index().size()).isEqualTo(4);

        h.extend("main", 50, Map.of("big", 24));
        assertThat(h.st().prefix.index().size()).isEqualTo(1);
        h.verifyAll();
        h.kv.assertPagesConserved();
    }

    @Test
    void generatedTokensKeyThePagesTheyFill() {
        KvHarness h = cached(32);
        int[] prompt = range(1, 6);
        h.kv.ingestRequest("a", keyed(prompt, 4));
        h.prefill("a", prompt);
        assertThat(h.st().prefix.index().size()).isEqualTo(1);
        for (int t = 0; t < 3; t++) {
            h.kv.extendPrefixChain("a", NODE, DECODE, Map.of("ids", new int[] {70 + t}));
            KVStep s = KVStep.builder().segments(List.of(new Segment("a", "main", 1))).build();
            h.run(s, ctx(List.of("a"), DECODE), Map.of(new StreamLabel("a", "main"), new int[] {70 + t}));
        }
        assertThat(h.st().prefix.index().size()).isEqualTo(2);

        int[] longer = {1, 2, 3, 4, 5, 6, 70, 71, 72, 99};
        h.kv.ingestRequest("b", keyed(longer, 4));
        assertThat(h.prefill("b", longer)).isEqualTo(8);
        h.verifyAll();
    }

    @Test
    void applyTrimsTheLeaseAndReleaseGivesItBack() {
        KvHarness h = cached(32);
        h.kv.ingestRequest("a", keyed(PROMPT, 4));
        h.prefill("a", PROMPT);
        h.kv.ingestRequest("b", keyed(PROMPT, 4));
        h.kv.resolveCachedPrefix("b", NODE, PREFILL, Map.of());
        h.kv.applyCachedPrefix("b", NODE, PREFILL, Map.of(), new CachedPrefix(7));
        assertThat(h.stream("b", "main").lease).hasSize(1);
        h.kv.releaseCachedPrefix("b", NODE, PREFILL);
        assertThat(h.stream("b", "main").lease).isNull();
        h.kv.assertPagesConserved();
    }

    @Test
    void followersAdoptTheLeaseRankZeroTookOnceTheirIndexHoldsIt() {
        KvHarness leader = cached(32);
        KvHarness follower = cached(32);
        leader.kv.ingestRequest("a", keyed(PROMPT, 4));
        leader.prefill("a", PROMPT);
        follower.kv.ingestRequest("b", keyed(PROMPT, 4));
        leader.kv.ingestRequest("b", keyed(PROMPT, 4));
        List<Integer> pages = leader.kv.leaseCachedPrefix("b", NODE, PREFILL);
        assertThat(pages).hasSize(2);

        assertThat(follower.kv.adoptCachedPrefix("b", NODE, PREFILL, pages, false)).isFalse();
        assertThatThrownBy(() -> follower.kv.adoptCachedPrefix("b", NODE, PREFILL, pages, true))
                .hasMessageContaining("does not hold");
        follower.kv.ingestRequest("a", keyed(PROMPT, 4));
        follower.prefill("a", PROMPT);
        assertThat(follower.kv.pageTrail()).containsExactly(leader.kv.pageTrail());
        assertThat(follower.kv.adoptCachedPrefix("b", NODE, PREFILL, pages, false)).isTrue();
        assertThat(follower.stream("b", "main").lease).isEqualTo(pages);
        follower.kv.assertPagesConserved();
    }

    @Test
    void aWalkOverSeveralLabelsAgreesOnTheShortestMatch() {
        KvHarness h = cached(32);
        int[] other = range(3000, 6);
        KVReqConfig a = keyed(PROMPT, 4);
        KVReqConfig b = keyed(other, 4);
        KVReqConfig both = new KVReqConfig(List.of("main", "aux"), null, null, null, null,
                Map.of("main", a.prefixKeys().get("main"), "aux", b.prefixKeys().get("main")),
                Map.of("main", a.prefixTail().get("main"), "aux", b.prefixTail().get("main")), null, true, null, null);
        h.kv.ingestRequest("w1", a);
        h.prefill("w1", PROMPT);
        h.kv.ingestRequest("w2", b);
        h.prefill("w2", other);

        h.kv.ingestRequest("x", both);
        // main matches 2 of its 3 keys, aux 1 of its 2 (the second names a partial page)
        assertThat(h.kv.resolveCachedPrefix("x", NODE, PREFILL, Map.of()).tokens()).isEqualTo(4);
        assertThat(h.stream("x", "main").lease).hasSize(2);
        assertThat(h.stream("x", "aux").lease).hasSize(1);
        h.kv.applyCachedPrefix("x", NODE, PREFILL, Map.of(), new CachedPrefix(4));
        assertThat(h.stream("x", "main").lease).hasSize(1);
        assertThat(h.stream("x", "aux").lease).hasSize(1);
        h.kv.assertPagesConserved();
    }
}
