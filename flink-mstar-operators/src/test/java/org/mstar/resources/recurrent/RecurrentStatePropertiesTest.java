package org.mstar.resources.recurrent;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.AllocationFailed;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.RecurrentStep;
import org.mstar.resources.Segment;
import org.mstar.resources.StateDType;
import org.mstar.resources.StepContext;

/**
 * The state pool under any sequence of requests arriving, steps admitted (some refused, some rolled back, some with
 * padding rows) planned and committed, requests finishing, preempted to host or for a recompute, and reloaded: slots
 * are conserved (free + held = capacity - 1), no two requests share one, the scratch slot is never handed out, a
 * refused or rolled-back admit leaves no trace, a fresh slot and the scratch are zero when read, token counts follow
 * the committed spans, and a state offloaded and reloaded is the same bytes.
 */
class RecurrentStatePropertiesTest {
    /** A layer of F32 SSM state and BF16 window, and a smaller second one: per-layer shapes and mixed dtypes. */
    static final List<RecurrentLayer> LAYERS = List.of(new RecurrentLayer(1, 2, 2, 3, 4, 4),
            new RecurrentLayer(3, 1, 2, 2, 3, 2));

    record Action(int kind, int pick, int extra, long seed) {}

    @Provide
    Arbitrary<List<Action>> actions() {
        return Combinators.combine(Arbitraries.integers().between(0, 11), Arbitraries.integers().between(0, 255),
                Arbitraries.integers().between(0, 7), Arbitraries.longs())
                .as(Action::new).list().ofMinSize(1).ofMaxSize(60);
    }

    @Property(tries = 200)
    void slotsAreConservedExclusiveAndStatesSurviveOffload(@ForAll("actions") List<Action> actions,
                                                          @ForAll @IntRange(min = 2, max = 5) int capacity,
                                                          @ForAll @IntRange(min = 0, max = 3) int hostSlots) {
        try (CpuDevice cpu = new CpuDevice(1)) {
            RecurrentStateSpec spec = new RecurrentStateSpec("ssm", Set.of("decoder"), Segment.MAIN, LAYERS,
                    StateDType.F32, StateDType.BF16, capacity, hostSlots);
            RecurrentStateManager m = new RecurrentStateManager(spec, cpu);
            try {
                new Run(cpu, m, hostSlots).play(actions);
            } finally {
                m.cleanup();
            }
        }
    }

    /** The model of the manager: what each request should hold. */
    private static final class Run {
        private final CpuDevice cpu;
        private final RecurrentStateManager m;
        private final int hostSlots;
        private final List<String> live = new ArrayList<>();
        private final Map<String, Integer> tokens = new HashMap<>();
        /** The state the "forward" last wrote into each request's slot. */
        private final Map<String, byte[]> written = new HashMap<>();
        private int next;

        Run(CpuDevice cpu, RecurrentStateManager m, int hostSlots) {
            this.cpu = cpu;
            this.m = m;
            this.hostSlots = hostSlots;
        }

        void play(List<Action> actions) {
            for (Action a : actions) {
                switch (a.kind()) {
                    case 0, 1 -> arrive();
                    case 2, 3, 4, 5 -> step(a);
                    case 6 -> pick(a, live).ifPresent(this::finish);
                    case 7, 8 -> pick(a, live).ifPresent(this::offload);
                    case 9 -> pick(a, live).ifPresent(this::recompute);
                    default -> pick(a, live.stream().filter(m::isOffloaded).toList()).ifPresent(this::reload);
                }
                assertInvariants();
            }
        }

        private static Optional<String> pick(Action a, List<String> from) {
            return from.isEmpty() ? Optional.empty() : Optional.of(from.get(a.pick() % from.size()));
        }

        private void arrive() {
            String rid = "r" + next++;
            m.ingestRequest(rid, null);
            m.ingestRequest(rid, null); // idempotent
            live.add(rid);
            tokens.put(rid, 0);
        }

        private void step(Action a) {
            Random rnd = new Random(a.seed());
            List<String> rows = new ArrayList<>();
            for (int i = 0; i < live.size(); i++) {
                if ((a.pick() >> (i % 8) & 1) == 1 && !m.isOffloaded(live.get(i))) {
                    rows.add(live.get(i));
                }
            }
            int padding = a.extra() % 3;
            List<Segment> segments = new ArrayList<>();
            rows.forEach(rid -> segments.add(new Segment(rid, Segment.MAIN, 1 + rnd.nextInt(5))));
            List<String> padded = new ArrayList<>(rows);
            for (int p = 0; p < padding; p++) {
                segments.add(new Segment("pad" + p, Segment.MAIN, 1));
                padded.add("pad" + p);
            }
            StepContext ctx = new StepContext(rows, "decode", 0, false);
            ctx.setPaddedRequestIds(padded);
            RecurrentStep step = new RecurrentStep(segments);
            Snapshot before = snapshot();
            long needing = rows.stream().filter(rid -> m.slotOf(rid) < 0).count();

            AdmitOutcome o = m.admit(step, ctx);
            if (!o.ok()) {
                assertThat(o.reason()).isInstanceOf(AllocationFailed.class);
                assertThat(needing).as("refused with enough free slots").isGreaterThan(before.free);
                assertThat(snapshot()).as("a refused admit left a trace").isEqualTo(before);
                m.rollbackAdmit(step, ctx); // the runner rolls back the refusing resource too
                assertThat(snapshot()).as("rollback after a refusal took more").isEqualTo(before);
                return;
            }
            assertThat(needing).as("admitted beyond the free slots").isLessThanOrEqualTo(before.free);
            for (String rid : rows) {
                if (before.slots.get(rid) < 0) {
                    assertThat(slotBytes(m.slotOf(rid))).as("a fresh slot holds a state").containsOnly(0);
                }
            }
            if (a.extra() >= 6) {
                m.rollbackAdmit(step, ctx); // admitted, but the step will not run
                assertThat(snapshot()).as("a rolled-back admit left a trace").isEqualTo(before);
                return;
            }
            RecurrentPlan plan = m.plan(step, ctx);
            if (!segments.isEmpty()) {
                int[] ids = cpu.toInts(plan.slotIds());
                for (int i = 0; i < segments.size(); i++) {
                    String rid = segments.get(i).requestId();
                    assertThat(ids[i]).as(rid + "'s planned slot").isEqualTo(i < rows.size() ? m.slotOf(rid) : 0);
                }
                if (padding > 0) {
                    assertThat(slotBytes(0)).as("scratch not zeroed before a padded step").containsOnly(0);
                }
            }
            m.commit(step, ctx);
            segments.stream().limit(rows.size()).forEach(s -> tokens.merge(s.requestId(), s.span(), Integer::sum));
            // the forward: every row's state changes, padding rows write into the scratch
            for (String rid : rows) {
                written.put(rid, randomState(rnd));
                m.pool().write(m.slotOf(rid), written.get(rid));
            }
            m.pool().write(0, randomState(rnd));
        }

        private void finish(String rid) {
            m.removeRequest(rid);
            m.removeRequest(rid); // tolerated
            live.remove(rid);
            tokens.remove(rid);
            written.remove(rid);
        }

        private void offload(String rid) {
            Snapshot before = snapshot();
            boolean fits = m.slotOf(rid) >= 0 && before.offloaded < hostSlots;
            int freed = m.offload(rid);
            if (!fits) {
                assertThat(freed).isZero();
                assertThat(snapshot()).isEqualTo(before);
                return;
            }
            assertThat(freed).isEqualTo(1);
            assertThat(m.isOffloaded(rid)).isTrue();
            assertThat(m.slotOf(rid)).isEqualTo(-1);
        }

        private void recompute(String rid) {
            m.resetRequest(rid, true);
            tokens.put(rid, 0);
            written.remove(rid);
            assertThat(m.slotOf(rid)).isEqualTo(-1);
            assertThat(m.isOffloaded(rid)).isFalse();
        }

        private void reload(String rid) {
            boolean room = m.freeSlots() > 0;
            assertThat(m.canReload(rid)).isEqualTo(room);
            assertThat(m.reload(rid)).isEqualTo(room);
            assertThat(m.isOffloaded(rid)).isEqualTo(!room);
            if (room && written.containsKey(rid)) {
                assertThat(slotBytes(m.slotOf(rid))).as("reloaded state differs").isEqualTo(written.get(rid));
            }
        }

        private void assertInvariants() {
            assertThat(m.freeSlots() + m.usedSlots()).as("slots conserved").isEqualTo(m.capacity() - 1);
            Set<Integer> held = new HashSet<>();
            for (String rid : live) {
                int slot = m.slotOf(rid);
                assertThat(m.tokens(rid)).as(rid + "'s tokens").isEqualTo(tokens.get(rid));
                if (slot < 0) {
                    continue;
                }
                assertThat(m.isOffloaded(rid)).as(rid + " offloaded yet holds a slot").isFalse();
                assertThat(slot).as("the scratch handed out").isNotZero();
                assertThat(held.add(slot)).as("slot " + slot + " shared").isTrue();
                if (written.containsKey(rid)) {
                    assertThat(slotBytes(slot)).as(rid + "'s state").isEqualTo(written.get(rid));
                }
            }
            assertThat(held).hasSize(m.usedSlots());
            for (String rid : live) {
                if (m.isOffloaded(rid) && written.containsKey(rid)) {
                    assertThat(m.publish(rid).state()).as(rid + "'s host copy").isEqualTo(written.get(rid));
                }
            }
        }

        private byte[] slotBytes(int slot) {
            return m.pool().read(slot);
        }

        private Snapshot snapshot() {
            Map<String, Integer> slots = new HashMap<>();
            Map<String, Integer> counts = new HashMap<>();
            int offloaded = 0;
            for (String rid : live) {
                slots.put(rid, m.slotOf(rid));
                counts.put(rid, m.tokens(rid));
                offloaded += m.isOffloaded(rid) ? 1 : 0;
            }
            return new Snapshot(slots, counts, m.freeSlots(), offloaded);
        }

        /** Finite values in each region's dtype, laid out as the pool's bytes. */
        private static byte[] randomState(Random rnd) {
            int size = 0;
            for (RecurrentLayer l : LAYERS) {
                size += (int) (l.ssmElements() * 4 + l.convElements() * 2);
            }
            ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
            for (RecurrentLayer l : LAYERS) {
                for (long i = 0; i < l.ssmElements(); i++) {
                    b.putFloat((float) rnd.nextGaussian());
                }
                for (long i = 0; i < l.convElements(); i++) {
                    b.putShort((short) (Float.floatToIntBits((float) rnd.nextGaussian()) >>> 16));
                }
            }
            return b.array();
        }
    }

    private record Snapshot(Map<String, Integer> slots, Map<String, Integer> tokens, int free, int offloaded) {}
}
