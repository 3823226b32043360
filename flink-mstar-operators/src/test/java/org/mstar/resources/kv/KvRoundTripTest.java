package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.resources.kv.KvHarness.DECODE;
import static org.mstar.resources.kv.KvHarness.HEADS;
import static org.mstar.resources.kv.KvHarness.HEAD_DIM;
import static org.mstar.resources.kv.KvHarness.LAYERS;
import static org.mstar.resources.kv.KvHarness.NODE;
import static org.mstar.resources.kv.KvHarness.TOKEN_ELEMS;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.AdmitOutcome;
import org.mstar.resources.Fork;
import org.mstar.resources.KVCacheDType;
import org.mstar.resources.KVStep;
import org.mstar.resources.RetentionPolicy;
import org.mstar.resources.Segment;
import org.mstar.resources.StepContext;
import org.mstar.resources.StreamLabel;

/**
 * Random K/V written through {@link KVManager#writeKv} and read back through the page tables is
 * exactly what was written, after forks, retention, offload/reload and a publish → retrieve; in an FP8 (E4M3) pool,
 * exactly each value's nearest code, whose bytes every move keeps.
 */
class KvRoundTripTest {
    private final Random rnd = new Random(20240611);
    private final CpuDevice device = new CpuDevice(1);
    /** Per stream, per resident token: [layer][K | V elements]. */
    private final Map<String, List<float[][]>> written = new HashMap<>();

    private KVManager manager(String name, InProcessKvTransport.Hub hub, KVCacheDType dtype) {
        return new KVManager(KvHarness.config(24, 4).cpuOffloadPages(16).cacheDType(dtype).build(), device, DType.F32,
                1, 0, new InProcessKvTransport(hub, name));
    }

    /** One step of {@code span} random tokens on a's {@code label}; {@code b} carries the rest of the step. */
    private void step(KVManager kv, String label, int span, KVStep.Builder b) {
        KVStep s = b.segments(List.of(new Segment("a", label, span))).build();
        StepContext ctx = new StepContext(List.of("a"), "prefill", 0, false);
        AdmitOutcome o = kv.admit(s, ctx);
        assertThat(o.ok()).isTrue();
        kv.plan(s, ctx);
        List<float[][]> tokens = new ArrayList<>();
        float[][] k = new float[LAYERS][span * TOKEN_ELEMS];
        float[][] v = new float[LAYERS][span * TOKEN_ELEMS];
        for (int t = 0; t < span; t++) {
            float[][] tok = new float[LAYERS][2 * TOKEN_ELEMS];
            for (int l = 0; l < LAYERS; l++) {
                for (int e = 0; e < 2 * TOKEN_ELEMS; e++) {
                    tok[l][e] = (float) rnd.nextGaussian();
                }
                System.arraycopy(tok[l], 0, k[l], t * TOKEN_ELEMS, TOKEN_ELEMS);
                System.arraycopy(tok[l], TOKEN_ELEMS, v[l], t * TOKEN_ELEMS, TOKEN_ELEMS);
                for (int e = 0; e < 2 * TOKEN_ELEMS; e++) {
                    tok[l][e] = KvHarness.stored(kv, tok[l][e]);
                }
            }
            tokens.add(tok);
        }
        for (int l = 0; l < LAYERS; l++) {
            try (Tensor kt = device.fromFloats(k[l], DType.F32, span, HEADS, HEAD_DIM);
                 Tensor vt = device.fromFloats(v[l], DType.F32, span, HEADS, HEAD_DIM)) {
                kv.writeKv(kt, vt, l, label);
            }
        }
        CacheStream st = kv.state().stream("a", label);
        int releasedBefore = st.released;
        kv.commit(s, ctx);
        List<float[][]> list = written.computeIfAbsent(label, x -> new ArrayList<>());
        list.addAll(tokens);
        int gone = st.released - releasedBefore;
        if (gone > 0) {
            int first = kv.state().pagesFor(st.protectedPrefix) * 4;
            list.subList(first, first + gone).clear();
        }
        for (Fork f : s.postForks()) {
            written.put(f.to(), new ArrayList<>(written.get(f.from())));
        }
    }

    private void assertReadsBack(KVManager kv, String label) {
        List<float[][]> want = written.get(label);
        for (int l = 0; l < LAYERS; l++) {
            float[][] got = kv.readKv("a", label, l);
            assertThat(got[0]).hasSize(want.size() * TOKEN_ELEMS);
            for (int t = 0; t < want.size(); t++) {
                for (int e = 0; e < TOKEN_ELEMS; e++) {
                    assertThat(got[0][t * TOKEN_ELEMS + e]).isEqualTo(want.get(t)[l][e]);
                    assertThat(got[1][t * TOKEN_ELEMS + e]).isEqualTo(want.get(t)[l][TOKEN_ELEMS + e]);
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(KVCacheDType.class)
    void writtenKvReadsBackExactlyThroughEveryMove(KVCacheDType dtype) {
        InProcessKvTransport.Hub hub = new InProcessKvTransport.Hub();
        KVManager kv = manager("producer", hub, dtype);
        kv.ingestRequest("a", null);

        step(kv, "main", 9, KVStep.builder());
        assertReadsBack(kv, "main");

        step(kv, "main", 3, KVStep.builder().postForks(List.of(new Fork("main", "cfg"))));
        assertReadsBack(kv, "main");
        assertReadsBack(kv, "cfg");

        RetentionPolicy window = new RetentionPolicy(8, 4);
        for (int i = 0; i < 5; i++) {
            step(kv, "main", 2, KVStep.builder().retention(Map.of(new StreamLabel("a", "main"), window)));
            assertReadsBack(kv, "main");
        }
        assertThat(kv.state().stream("a", "main").released).isPositive();
        step(kv, "cfg", 5, KVStep.builder());

        assertThat(kv.offload("a")).isPositive();
        assertThat(kv.reload("a")).isTrue();
        assertReadsBack(kv, "main");
        assertReadsBack(kv, "cfg");
        kv.assertPagesConserved();

        KVManager decode = manager("decode", hub, dtype);
        decode.ingestRequest("a", null);
        assertThat(decode.admitRetrieve("a", NODE, DECODE, kv.publish("a"))).isEqualTo(AdmitOutcome.OK);
        assertReadsBack(decode, "main");
        step(decode, "main", 1, KVStep.builder());
        assertReadsBack(decode, "main");
        decode.assertPagesConserved();
    }

    /** Pages of one element type are not read as another's: a retrieve across them is refused, naming both. */
    @Test
    void fp8PagesAreNotRetrievedIntoAPoolOfTheModelsDtype() {
        InProcessKvTransport.Hub hub = new InProcessKvTransport.Hub();
        KVManager kv = manager("producer", hub, KVCacheDType.FP8_E4M3);
        kv.ingestRequest("a", null);
        step(kv, "main", 9, KVStep.builder());
        KVManager decode = manager("decode", hub, KVCacheDType.AUTO);
        decode.ingestRequest("a", null);
        AdmitOutcome refused = decode.admitRetrieve("a", NODE, DECODE, kv.publish("a"));
        assertThat(refused.ok()).isFalse();
        assertThat(refused.reason().terminal()).isTrue();
        assertThat(refused.reason().message()).contains("F8_E4M3").contains("F32");
        decode.assertPagesConserved();
        kv.assertPagesConserved();
    }
}
