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
import org.mstar.resources.Offload;
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
 * prefill side's state handed to a decode side through the codec's bytes, a stale echo not rewinding it.
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
}
