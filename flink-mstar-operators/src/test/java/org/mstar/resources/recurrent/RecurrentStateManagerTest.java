package org.mstar.resources.recurrent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.BucketKey;
import org.mstar.resources.CachedPrefix;
import org.mstar.resources.Offload;
import org.mstar.resources.PrefixCaching;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.RecurrentStep;
import org.mstar.resources.Resource;
import org.mstar.resources.Segment;
import org.mstar.resources.SlotLease;
import org.mstar.resources.StateDType;
import org.mstar.resources.StepContext;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;

/**
 * The recurrent-state resource end to end on the CPU: built from its spec by the standard builders, Offload only with
 * host slots, the slot per row under a graph lease in one static buffer, a refusal naming the request, and a
 * prefill side's state handed to a decode side through the codec's bytes, a stale echo not rewinding it, and the
 * prefix cache's snapshots: taken at the interval's points of a prompt, a later request with the same leading tokens
 * starting from the very bytes, a pinned snapshot outliving an eviction.
 */
class RecurrentStateManagerTest {
    private final CpuDevice cpu = new CpuDevice(1);
    private final EngineResourceInfo info = EngineResourceInfo.singleRank(cpu, DType.F32);
    private final ResourceFactory factory = new ResourceFactory(StandardBuilders.all());
    private RecurrentStateManager prefill;
    private RecurrentStateManager decode;

    @AfterEach
    void close() {
        for (RecurrentStateManager m : new RecurrentStateManager[] {prefill, decode}) {
            if (m != null) {
                m.cleanup();
            }
        }
        cpu.close();
    }

    private static RecurrentStateSpec spec(int slots, int hostSlots) {
        return new RecurrentStateSpec("ssm", Set.of("decoder"), Segment.MAIN,
                List.of(new RecurrentLayer(0, 2, 2, 2, 3, 4)), StateDType.F32, StateDType.F32, slots, hostSlots);
    }

    private RecurrentStateManager build(RecurrentStateSpec spec) {
        Resource r = factory.build(spec, info);
        assertThat(r).isInstanceOf(RecurrentStateManager.class);
        return (RecurrentStateManager) r;
    }

    private static RecurrentStep step(String... rids) {
        return new RecurrentStep(Arrays.stream(rids).map(r -> new Segment(r, Segment.MAIN, 1)).toList());
    }

    @Test
    void offloadIsACapabilityOnlyWithHostSlots() {
        prefill = build(spec(3, 0));
        decode = build(spec(3, 2));
        assertThat(prefill.capability(Offload.class)).isEmpty();
        assertThat(decode.capability(Offload.class)).containsSame(decode);
    }

    @Test
    void yamlTunesSlotsAndRefusesUnknownKeys() {
        RecurrentStateSpec spec = spec(3, 0);
        spec.applyYamlOverrides(Map.of("slots", 9, "host_slots", 4));
        assertThat(spec.slots()).isEqualTo(9);
        assertThat(spec.hostSlots()).isEqualTo(4);
        assertThatThrownBy(() -> spec.applyYamlOverrides(Map.of("slot", 2)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("slot");
        assertThatThrownBy(() -> spec.applyYamlOverrides(Map.of("slots", 1)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scratch");
    }

    @Test
    void aLeasedPlanWritesTheBucketsStaticBufferWithPaddingAtTheScratch() {
        prefill = build(spec(4, 0));
        SlotLease lease = new SlotLease(0, new BucketKey("decode", 4, 4));
        RecurrentPlan firstPlan = planPadded(List.of("a", "b"), lease);
        RecurrentPlan secondPlan = planPadded(List.of("b"), lease);
        assertThat(secondPlan.slotIds()).as("a replay reads one address").isSameAs(firstPlan.slotIds());
        assertThat(secondPlan.fresh()).isFalse();
        assertThat(cpu.toInts(secondPlan.slotIds())).startsWith(prefill.slotOf("b"), 0, 0, 0);
    }

    private RecurrentPlan planPadded(List<String> rids, SlotLease lease) {
        rids.forEach(r -> prefill.ingestRequest(r, null));
        List<String> padded = new ArrayList<>(rids);
        while (padded.size() < 4) {
            padded.add("pad" + padded.size());
        }
        StepContext ctx = new StepContext(rids, "decode", 0, false);
        ctx.setPaddedRequestIds(padded);
        ctx.setSlotLease(lease);
        RecurrentStep step = step(padded.toArray(String[]::new));
        assertThat(prefill.admit(step, ctx).ok()).isTrue();
        RecurrentPlan plan = prefill.plan(step, ctx);
        prefill.commit(step, ctx);
        return plan;
    }

    @Test
    void aFullPoolRefusesNamingTheRequestAndKeepsNothing() {
        prefill = build(spec(2, 0));
        prefill.ingestRequest("a", null);
        prefill.ingestRequest("b", null);
        StepContext ctx = new StepContext(List.of("a", "b"), "prefill", 0, false);
        AdmitOutcome o = prefill.admit(step("a", "b"), ctx);
        assertThat(o.ok()).isFalse();
        assertThat(o.reason()).isInstanceOfSatisfying(AllocationFailed.class, f -> {
            assertThat(f.requestId()).isEqualTo("b");
            assertThat(f.pagesShort()).isEqualTo(1);
        });
        assertThat(prefill.slotOf("a")).isEqualTo(-1);
        assertThat(prefill.freeSlots()).isEqualTo(1);
    }

    @Test
    void aPrefillsStateCrossesAsBytesAndAStaleEchoDoesNotRewindIt() {
        prefill = build(spec(3, 0));
        decode = build(spec(3, 0));
        prefill.ingestRequest("r", null);
        StepContext ctx = new StepContext(List.of("r"), "prefill", 0, false);
        RecurrentStep chunk = new RecurrentStep(List.of(new Segment("r", Segment.MAIN, 5)));
        assertThat(prefill.admit(chunk, ctx).ok()).isTrue();
        prefill.plan(chunk, ctx);
        prefill.commit(chunk, ctx);
        byte[] state = new byte[(int) prefill.pool().stateBytes()];
        new Random(41).nextBytes(state);
        prefill.pool().write(prefill.slotOf("r"), state);

        PublishedRecurrentState published = prefill.publish("r");
        PublishedRecurrentState received = decode.codec().decode(prefill.codec().encode(published));
        decode.ingestRequest("r", null);
        assertThat(decode.admitRetrieve("r", "decoder", "decode", received)).isEqualTo(AdmitOutcome.OK);
        assertThat(decode.tokens("r")).isEqualTo(5);
        assertThat(decode.publish("r").state()).isEqualTo(state);

        byte[] later = state.clone();
        later[0] ^= 1;
        decode.pool().write(decode.slotOf("r"), later);
        assertThat(decode.admitRetrieve("r", "decoder", "decode", received)).isEqualTo(AdmitOutcome.OK);
        assertThat(decode.publish("r").state()).as("a stale echo rewound the state").isEqualTo(later);
    }

    /** One committed step of {@code span} tokens of {@code rid}, after which its state is {@code state}. */
    private void runStep(String rid, int span, byte[] state) {
        StepContext ctx = new StepContext(List.of(rid), "prefill", 0, false);
        RecurrentStep chunk = new RecurrentStep(List.of(new Segment(rid, Segment.MAIN, span)));
        assertThat(prefill.admit(chunk, ctx).ok()).isTrue();
        prefill.plan(chunk, ctx);
        prefill.pool().write(prefill.slotOf(rid), state);
        prefill.commit(chunk, ctx);
    }

    private int probe(String rid, int[] prompt) {
        prefill.ingestRequest(rid, null);
        Map<String, int[]> inputs = Map.of("new_token", prompt);
        CachedPrefix p = prefill.resolveCachedPrefix(rid, "decoder", "generate", inputs);
        prefill.applyCachedPrefix(rid, "decoder", "generate", inputs, p);
        return p.tokens();
    }

    @Test
    void snapshotsAtThePromptsPointsServeTheSameLeadingTokensAndPinsOutliveEviction() {
        prefill = build(spec(4, 0).withSnapshots(2, 4, 2));
        assertThat(prefill.capability(PrefixCaching.class)).containsSame(prefill);
        RecurrentStateManager plain = build(spec(4, 0));
        assertThat(plain.capability(PrefixCaching.class)).isEmpty();
        plain.cleanup();
        prefill.enablePrefixCache(new byte[] {7}, Set.of("generate"));
        Random random = new Random(3);
        byte[] after4 = new byte[(int) prefill.pool().stateBytes()];
        byte[] after8 = after4.clone();
        random.nextBytes(after4);
        random.nextBytes(after8);
        int[] prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13};
        assertThat(probe("a", prompt)).isZero();
        runStep("a", 4, after4);
        runStep("a", 4, after8);
        assertThat(prefill.snapshotsKept()).isEqualTo(2);

        int[] same8 = {5, 6, 7, 8, 9, 10, 11, 12, 99, 98};
        assertThat(prefill.fitCachedPrefix("x", "decoder", "generate", 8)).as("no keys yet").isZero();
        assertThat(probe("b", same8)).isEqualTo(8);
        assertThat(prefill.fitCachedPrefix("b", "decoder", "generate", 7)).isEqualTo(4);
        assertThat(prefill.tokens("b")).isEqualTo(8);
        assertThat(probe("c", new int[] {5, 6, 7, 8, 0, 0})).as("only the first point is shared").isEqualTo(4);
        prefill.removeRequest("c");

        // "d" takes two snapshots of its own: the one at 4 evicts a's 4, but b's pinned 8 stays
        byte[] other = after4.clone();
        other[0] ^= 1;
        assertThat(probe("d", new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9})).isZero();
        runStep("d", 4, other);
        runStep("d", 4, other);
        assertThat(prefill.snapshotsKept()).isEqualTo(2);
        assertThat(probe("e", prompt)).as("a's 4 is gone, its 8 pinned").isEqualTo(8);

        StepContext ctx = new StepContext(List.of("b"), "prefill", 0, false);
        RecurrentStep rest = new RecurrentStep(List.of(new Segment("b", Segment.MAIN, 2)));
        assertThat(prefill.admit(rest, ctx).ok()).isTrue();
        assertThat(prefill.publish("b").state()).as("b starts from a's state after 8 tokens").isEqualTo(after8);
        prefill.plan(rest, ctx);
        prefill.commit(rest, ctx);
        assertThat(prefill.tokens("b")).isEqualTo(10);
    }
}
