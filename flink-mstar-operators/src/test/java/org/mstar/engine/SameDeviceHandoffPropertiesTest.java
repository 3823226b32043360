package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.kv.KvShelf;

/**
 * Same-device hand-offs by handle under any interleaving of prefill steps, decode steps, hand-offs delivered or
 * lost, requests dropped on the decode side, and failovers of either engine or both: after every action each
 * engine's pages are conserved (every page free or named by exactly its owners, lent pages counted once per
 * hand-off), nothing stays lent once every hand-off was delivered, and the tokens of the requests not dropped are
 * the colocated engine's.
 *
 * <p>A failover is modelled as the operators' restore does it: a new engine; requests the prefill side had not
 * handed off are submitted again, requests the decode side had are resumed with the tokens emitted so far, and
 * (for a failover of both) hand-offs in flight are lost and their requests submitted again.
 */
class SameDeviceHandoffPropertiesTest {
    private static Path dir;
    private static CpuDevice cpu;
    private static LlamaModel model;
    private static LlamaModel prefillModel;
    private static LlamaModel decodeModel;
    private static List<GenerationRequest> requests;
    private static Map<String, List<Integer>> expected;

    @BeforeContainer
    static void load() throws Exception {
        dir = Files.createTempDirectory("mstar-same-device");
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 3, dir, cpu);
        prefillModel = new LlamaModel(model.weights(), DType.F32, "random:3");
        decodeModel = new LlamaModel(model.weights(), DType.F32, "random:3");
        requests = SameDeviceHandoffTest.workload(13, 8);
        expected = SameDeviceHandoffTest.colocated(model, requests);
    }

    @AfterContainer
    static void close() throws Exception {
        model.close();
        cpu.close();
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** The two engines, what is between them, and what each side holds, as the operators would track it. */
    private static final class Pair implements AutoCloseable {
        final KvShelf shelf = new KvShelf();
        final Map<String, GenerationRequest> byId = new HashMap<>();
        final SameDeviceHandoffTest.Tokens tokens = new SameDeviceHandoffTest.Tokens();
        final ArrayDeque<PrefillHandoff> inFlight = new ArrayDeque<>();
        final Set<String> atPrefill = new HashSet<>();
        final Set<String> atDecode = new HashSet<>();
        final Set<String> finished = new HashSet<>();
        /** Dropped on the decode side (as a queue timeout or a cancellation drops them): they never finish. */
        final Set<String> dropped = new HashSet<>();
        String lastDelivered;
        LlamaEngine prefill;
        LlamaEngine decode;

        Pair() {
            requests.forEach(r -> byId.put(r.requestId(), r));
            // 24 pages: lends of undelivered hand-offs are taken back under pressure
            prefill = SameDeviceHandoffTest.lending(prefillModel,
                    SameDeviceHandoffTest.options(8, 24, EngineRole.PREFILL), shelf);
            decode = SameDeviceHandoffTest.lending(decodeModel,
                    SameDeviceHandoffTest.options(64, 200, EngineRole.DECODE), shelf);
            requests.forEach(r -> {
                prefill.submit(r);
                atPrefill.add(r.requestId());
            });
        }

        void stepPrefill() {
            StepResult p = prefill.step();
            take(p);
            for (PrefillHandoff h : p.handoffs()) {
                atPrefill.remove(h.requestId());
                inFlight.add(h);
            }
        }

        void deliver() {
            PrefillHandoff h = inFlight.poll();
            if (h != null) {
                decode.receive(byId.get(h.requestId()), h);
                atDecode.add(h.requestId());
                lastDelivered = h.requestId();
            }
        }

        void stepDecode() {
            take(decode.step());
        }

        private void take(StepResult r) {
            tokens.add(r);
            r.finished().forEach(f -> finished.add(f.requestId()));
        }

        /**
         * Drops the request last delivered to the decode side if it has not finished (still in the decode engine's
         * inbox unless a decode step ran since).
         */
        void dropAtDecode() {
            if (lastDelivered != null && !finished.contains(lastDelivered) && dropped.add(lastDelivered)) {
                decode.remove(lastDelivered);
            }
        }

        void failPrefill() {
            prefill.close();
            prefill = SameDeviceHandoffTest.lending(prefillModel,
                    SameDeviceHandoffTest.options(8, 24, EngineRole.PREFILL), shelf);
            atPrefill.forEach(rid -> prefill.submit(byId.get(rid)));
        }

        void failDecode() {
            decode.close();
            decode = SameDeviceHandoffTest.lending(decodeModel,
                    SameDeviceHandoffTest.options(64, 200, EngineRole.DECODE), shelf);
            for (String rid : atDecode) {
                if (!finished.contains(rid) && !dropped.contains(rid)) {
                    decode.resume(byId.get(rid), emitted(rid));
                }
            }
        }

        void failBoth() {
            inFlight.forEach(h -> atPrefill.add(h.requestId()));
            inFlight.clear();
            failDecode();
            failPrefill();
        }

        private int[] emitted(String rid) {
            Map<Integer, Integer> byIndex = tokens.byIndex.get(rid);
            int[] out = new int[byIndex.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = byIndex.get(i);
            }
            return out;
        }

        void checkPages() {
            prefillModel.resources().kv().assertPagesConserved();
            decodeModel.resources().kv().assertPagesConserved();
            assertThat(shelf.outstanding()).isLessThanOrEqualTo(prefillModel.resources().kv().lentHandoffs());
        }

        void drain() {
            for (int i = 0; prefill.hasWork() || decode.hasWork() || !inFlight.isEmpty(); i++) {
                assertThat(i).isLessThan(2_000);
                stepPrefill();
                while (!inFlight.isEmpty()) {
                    deliver();
                }
                stepDecode();
                checkPages();
            }
        }

        @Override
        public void close() {
            prefill.close();
            decode.close();
        }
    }

    @Property(tries = 40)
    void pagesAreConservedAndTheTokensAreTheColocatedOnesWhateverFails(
            @ForAll @Size(max = 60) List<@IntRange(min = 0, max = 10) Integer> actions) {
        try (Pair pair = new Pair()) {
            for (int a : actions) {
                switch (a) {
                    case 0, 1, 2 -> pair.stepPrefill();
                    case 3, 4 -> pair.deliver();
                    case 5, 6 -> pair.stepDecode();
                    case 7 -> pair.failPrefill();
                    case 8 -> pair.failDecode();
                    case 9 -> pair.dropAtDecode();
                    default -> pair.failBoth();
                }
                pair.checkPages();
            }
            pair.drain();
            Map<String, List<Integer>> served = new HashMap<>(pair.tokens.sequences());
            Map<String, List<Integer>> wanted = new HashMap<>(expected);
            served.keySet().removeAll(pair.dropped);
            wanted.keySet().removeAll(pair.dropped);
            assertThat(served).isEqualTo(wanted);
            assertThat(prefillModel.resources().kv().lentHandoffs()).isZero();
            assertThat(pair.shelf.outstanding()).isZero();
        }
    }
}
