package org.mstar.resources.runner;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AdmitRuntimeError;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.Publication;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.Resource;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Node-scoped sweeps (spec §2.4) and prefix-cache resolution (§2.5, §2.6; invariants 7 and 11). */
class StepRunnerNodeSweepTest {
    private record Info(String name) implements PublishedInfo {
        @Override public void update(PublishedInfo other) {}
        @Override public PublishedInfo copy() { return this; }
    }

    private final List<String> journal = new ArrayList<>();
    private RecordingResource kv;
    private RecordingResource attn;
    private RecordingResource encKv;
    private StepRunner runner;

    @BeforeEach
    void setUp() {
        Map<String, Resource> resources = new LinkedHashMap<>();
        resources.put("kv", kv = new RecordingResource("kv", journal));
        resources.put("attn", attn = new RecordingResource("attn", journal, "kv"));
        resources.put("enc_kv", encKv = new RecordingResource("enc_kv", journal));
        runner = new StepRunner(resources, Map.of(
                "decoder", Set.of("kv", "attn"),
                "encoder", Set.of("enc_kv"),
                "sampler", Set.of()));
        for (RecordingResource r : List.of(kv, attn, encKv)) {
            r.publication = true;
        }
    }

    @Test
    void admitRetrieveAsksOnlyTheNodesOwnRetrievingResourcesWithTheirOwnPublication() {
        attn.publication = false;
        Info kvInfo = new Info("kv pages");

        FullAdmitOutcome outcome = runner.admitRetrieve("r1", "decoder", "decode",
                Map.of("kv", kvInfo, "enc_kv", new Info("encoder pages")));

        assertThat(outcome).isEqualTo(FullAdmitOutcome.OK);
        assertThat(journal).containsExactly("kv.admitRetrieve");
        assertThat(kv.retrieved).containsExactly(kvInfo);
    }

    @Test
    void admitRetrieveShortCircuitsOnTheFirstRefusalAndNamesIt() {
        AdmitRuntimeError mismatch = new AdmitRuntimeError("world size mismatch", Set.of("r1"));
        kv.retrieveAnswer = AdmitOutcome.refused(mismatch);

        FullAdmitOutcome outcome = runner.admitRetrieve("r1", "decoder", "decode", null);

        assertThat(outcome.failedResource()).isEqualTo("kv");
        assertThat(outcome.reason()).isSameAs(mismatch);
        assertThat(journal).containsExactly("kv.admitRetrieve");
    }

    @Test
    void admitRetrieveIsReadyOnlyWhenEveryResourceIs() {
        attn.retrieveAnswer = AdmitOutcome.NOT_READY;

        assertThat(runner.admitRetrieve("r1", "decoder", "decode", Map.of())).isEqualTo(FullAdmitOutcome.NOT_READY);
        assertThat(journal).containsExactly("kv.admitRetrieve", "attn.admitRetrieve");
    }

    @Test
    void aNodeThatOwnsNothingIsAskedNothingAndAnUnlistedNodeAsksEveryone() {
        assertThat(runner.admitRetrieve("r1", "sampler", "decode", null)).isEqualTo(FullAdmitOutcome.OK);
        assertThat(journal).isEmpty();

        runner.admitRetrieve("r1", "vocoder", "decode", null);
        assertThat(journal).containsExactly("enc_kv.admitRetrieve", "kv.admitRetrieve", "attn.admitRetrieve");
    }

    /** A resource with only the capability of publishing {@link Info}s: no admission, plan or prefix cache. */
    private record InfoPublisher(List<String> journal) implements Resource, Publication<Info> {
        @Override public Class<Info> publishedType() { return Info.class; }
        @Override public Info publish(String rid) { return new Info("of " + rid); }

        @Override
        public AdmitOutcome admitRetrieve(String rid, String nodeName, String graphWalk, Info published) {
            journal.add("publisher.admitRetrieve:" + published.name());
            return AdmitOutcome.OK;
        }
    }

    /** A publication of another type than a resource's own is refused by name, and one of its own passes typed. */
    @Test
    void admitRetrieveHandsEachResourceAPublicationOfItsOwnType() {
        StepRunner typed = new StepRunner(Map.of("pub", new InfoPublisher(journal)), null);
        record Foreign() implements PublishedInfo {
            @Override public void update(PublishedInfo other) {}
            @Override public PublishedInfo copy() { return this; }
        }

        assertThat(typed.admitRetrieve("r1", null, "decode", Map.of("pub", new Info("pages")))).isEqualTo(
                FullAdmitOutcome.OK);
        assertThatThrownBy(() -> typed.admitRetrieve("r1", null, "decode", Map.of("pub", new Foreign())))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'pub'")
                .hasMessageContaining("retrieves Info, not Foreign");
        assertThat(journal).containsExactly("publisher.admitRetrieve:pages");
    }

    /** The sweeps pass over a resource without the capability they drive, as over one answering the no-op. */
    @Test
    void aResourceWithoutACapabilityIsPassedOver() {
        StepRunner typed = new StepRunner(Map.of("pub", new InfoPublisher(journal)), null);

        assertThat(typed.resolveCachedPrefix("r1", null, "decode", Map.of())).isNull();
        assertThat(typed.pageTrails(null)).isEmpty();
        assertThat(typed.publish(List.of("r1"), null, "decode", null))
                .isEqualTo(Map.of("r1", Map.of("pub", new Info("of r1"))));
    }

    @Test
    void publishReturnsTheNodesNonNullInfoPerRequestUnderEachRequestsWalk() {
        Info kvInfo = new Info("kv");
        kv.publishes = kvInfo;
        encKv.publishes = new Info("encoder");

        Map<String, Map<String, PublishedInfo>> published = runner.publish(
                List.of("r1", "r2"), "decoder", "combined", Map.of("r1", "prefill"));

        assertThat(published).containsOnlyKeys("r1", "r2");
        assertThat(published.get("r1")).containsExactly(Map.entry("kv", kvInfo));
        assertThat(journal).containsExactly(
                "kv.publishForStep:r1@prefill", "attn.publishForStep:r1@prefill",
                "kv.publishForStep:r2@combined", "attn.publishForStep:r2@combined");
    }

    @Test
    void aRequestWithNothingToPublishHasNoEntry() {
        assertThat(runner.publish(List.of("r1"), "decoder", "decode", null)).isEmpty();
        assertThat(runner.publishAfterStop(List.of("r1"), "decoder", "decode", null)).isEmpty();
    }

    @Test
    void snapshotsAreFinishedIntoTheSamePublication() {
        Info kvInfo = new Info("kv");
        kv.publishes = kvInfo;

        Map<String, Map<String, Object>> snapshots = runner.publishSnapshot(List.of("r1"), "decoder", "decode", null);
        Map<String, Map<String, PublishedInfo>> published =
                runner.publishFromSnapshots(snapshots, List.of("r1", "r2"), "decoder", "decode", null);

        assertThat(snapshots).containsOnlyKeys("r1");
        assertThat(published).isEqualTo(Map.of("r1", Map.of("kv", kvInfo)));
    }

    @Test
    void graphBuffersAndPageTrailsAreSweptOverTheNodesResourcesOnly() {
        encKv.trail = new long[] {3, 42};
        kv.trail = new long[] {5, 7};

        runner.buildAcceleratorGraphBuffers(List.of(), 8, 1024, "encoder");
        Map<String, long[]> trails = runner.pageTrails("decoder");

        assertThat(journal).containsExactly(
                "enc_kv.buildAcceleratorGraphBuffers", "kv.pageTrail", "attn.pageTrail");
        assertThat(trails).containsOnlyKeys("kv");
        assertThat(trails.get("kv")).containsExactly(5, 7);
    }

    @Test
    void theAgreedPrefixIsTheSmallestNonNullAnswer() {
        kv.cachedPrefix = new CachedPrefix(48);
        attn.cachedPrefix = new CachedPrefix(32);
        encKv.cachedPrefix = new CachedPrefix(0);

        assertThat(runner.resolveCachedPrefix("r1", "decoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(32));
    }

    @Test
    void theAgreedPrefixIsCutUntilEveryResourceCanTakeItOn() {
        kv.cachedPrefix = new CachedPrefix(48);
        attn.cachedPrefix = new CachedPrefix(44);
        attn.prefixMultiple = 16;
        assertThat(runner.resolveCachedPrefix("r1", "decoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(32));

        // each cut may leave a length the other cannot take: 44 → 32 → 24 → 16 → 12 → 0
        kv.prefixMultiple = 12;
        assertThat(runner.resolveCachedPrefix("r1", "decoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(0));
        attn.cachedPrefix = new CachedPrefix(48);
        assertThat(runner.resolveCachedPrefix("r1", "decoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(48));
    }

    @Test
    void noOpinionIsNotZero() {
        kv.cachedPrefix = new CachedPrefix(48);

        assertThat(runner.resolveCachedPrefix("r1", "decoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(48));
        assertThat(runner.resolveCachedPrefix("r1", "encoder", "prefill", Map.of())).isNull();

        encKv.cachedPrefix = new CachedPrefix(0);
        assertThat(runner.resolveCachedPrefix("r1", "encoder", "prefill", Map.of())).isEqualTo(new CachedPrefix(0));
    }

    @Test
    void applyAndCompleteReachEveryResourceOfTheNode() {
        runner.applyCachedPrefix("r1", "decoder", "prefill", Map.of(), new CachedPrefix(16));
        runner.completeCachedWalk("r1", "decoder", "prefill");

        assertThat(journal).containsExactly(
                "kv.applyCachedPrefix:16", "attn.applyCachedPrefix:16", "kv.completeCachedWalk", "attn.completeCachedWalk");
    }

    @Test
    void followersAdoptTheLeasesRankZeroTookOnTheResourcesThatTookThem() {
        kv.lease = List.of(4, 5);
        Map<String, List<Integer>> leases = runner.leaseCachedPrefix("r1", "decoder", "prefill");
        assertThat(leases).isEqualTo(Map.of("kv", List.of(4, 5)));
        journal.clear();

        assertThat(runner.adoptCachedPrefix("r1", "decoder", "prefill", leases, false)).isTrue();
        kv.adopts = false;
        assertThat(runner.adoptCachedPrefix("r1", "decoder", "prefill", leases, false)).isFalse();
        runner.releaseCachedPrefix("r1", "decoder", "prefill");

        assertThat(journal).containsExactly("kv.adoptCachedPrefix:[4, 5]", "kv.adoptCachedPrefix:[4, 5]",
                "kv.releaseCachedPrefix", "attn.releaseCachedPrefix");
    }

    @Test
    void prefixChainsAreOfferedOnlyToTheNodesResourcesWithACacheOpen() {
        attn.chains = true;
        encKv.chains = true;

        assertThat(runner.prefixChainKeys("decoder")).containsExactly("attn");
        runner.extendPrefixChains("r1", "decoder", "decode", Map.of("tokens", new int[] {7}));
        runner.extendPrefixChainsBatch(List.of("r1", "r2", "r3"), "decoder", rid -> rid.equals("r2") ? "talk" : "decode",
                Map.of("r1", Map.of("tokens", new int[] {8}), "r2", Map.of("tokens", new int[] {9})));

        assertThat(journal).containsExactly(
                "attn.extendPrefixChain:r1@decode", "attn.extendPrefixChain:r1@decode", "attn.extendPrefixChain:r2@talk");
    }
}
