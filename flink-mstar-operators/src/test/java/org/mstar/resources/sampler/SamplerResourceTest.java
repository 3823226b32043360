package org.mstar.resources.sampler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.SamplerStep;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.StepContext;

class SamplerResourceTest {
    private static final int VOCAB = 8;
    /** Logits of the distribution [0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0] (the zeros far below). */
    private static final float[] KNOWN = logitsOf(0.4, 0.3, 0.2, 0.1);

    private final CpuDevice device = new CpuDevice(1);

    @AfterEach
    void closeDevice() {
        device.close();
    }

    /** Every capability on, stop id 0 held back by min_tokens. */
    private SamplerResource sampler() {
        return new SamplerResource(new SamplerSpec("sampler", Set.of("llm"), VOCAB, true, true, 4, List.of(0), true),
                device);
    }

    private static float[] logitsOf(double... probs) {
        float[] l = new float[VOCAB];
        for (int i = 0; i < VOCAB; i++) {
            l[i] = i < probs.length ? (float) Math.log(probs[i]) : -1e4f;
        }
        return l;
    }

    private Tensor logits(float[]... rows) {
        float[] all = new float[rows.length * VOCAB];
        for (int r = 0; r < rows.length; r++) {
            System.arraycopy(rows[r], 0, all, r * VOCAB, VOCAB);
        }
        return device.fromFloats(all, DType.F32, rows.length, VOCAB);
    }

    private static Cfg cfg() {
        return new Cfg();
    }

    /** One step through the resource as a runner and forward would drive it: plan, sample, commit. */
    private static int[] step(SamplerResource s, SamplerStep step, List<String> rids, Tensor logits) {
        StepContext ctx = new StepContext(rids, "decode", 0, false);
        s.plan(step, ctx);
        int[] tokens = s.sample(rids, logits);
        s.commit(step, ctx);
        return tokens;
    }

    private static int[] step(SamplerResource s, List<String> rids, Tensor logits) {
        return step(s, new SamplerStep(), rids, logits);
    }

    /** {@code n} tokens of one request, one step each (so each at its own offset). */
    private int[] draws(SamplerResource s, String rid, float[] row, int n) {
        Tensor l = logits(row);
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = step(s, List.of(rid), l)[0];
        }
        return out;
    }

    private static int[] histogram(int[] tokens) {
        int[] h = new int[VOCAB];
        for (int t : tokens) {
            h[t]++;
        }
        return h;
    }

    // ---------------------------------------------------------------- greedy and penalty

    @Test
    void greedyReturnsTheArgmaxAfterThePenalty() {
        SamplerResource s = sampler();
        s.ingestRequest("plain", cfg().temperature(0).build());
        s.ingestRequest("penalised", cfg().temperature(0).penalty(2.0).build());
        float[] row = {0.1f, 0.2f, 5.0f, -1.0f, 4.5f, 0f, 0f, 0f};
        SamplerStep prompt = new SamplerStep(null, true, true, Map.of("penalised", new int[] {2}), null);

        int[] tokens = step(s, prompt, List.of("plain", "penalised"), logits(row, row));

        // 5.0 / 2 = 2.5 falls below 4.5
        assertThat(tokens).containsExactly(2, 4);
    }

    @Test
    void greedyRowsAloneTakeTheLowestIndexMaximumAsWithARandomRowBesideThem() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).build());
        s.ingestRequest("b", cfg().temperature(0).build());
        s.ingestRequest("random", cfg().temperature(1.0).seed(3).build());
        float[] tie = {1f, 3f, 0f, 3f, 2f, 0f, 0f, 0f};
        float[] plain = {0f, 0f, 0f, 0f, 0f, 0f, 7f, 6.5f};

        int[] alone = step(s, List.of("a", "b"), logits(tie, plain));
        int[] mixed = step(s, List.of("a", "b", "random"), logits(tie, plain, plain));

        assertThat(alone).containsExactly(1, 6);
        assertThat(mixed[0]).isEqualTo(1);
        assertThat(mixed[1]).isEqualTo(6);
    }

    @Test
    void suppressedTokensAreNeverDrawnAndNextOnesOnlyByTheNextAcceptedDraw() {
        SamplerResource s = sampler();
        s.ingestRequest("whisper", cfg().temperature(0).build());
        s.ingestRequest("other", cfg().temperature(0).build());
        float[] row = {0.1f, 0.2f, 5.0f, -1.0f, 4.5f, 4.0f, 3.0f, 0f};
        s.suppress("whisper", new int[] {2, 99});
        s.suppressNext("whisper", new int[] {4});

        // the next draw skips 2 (always) and 4 (this draw only); the other request is untouched
        assertThat(step(s, List.of("whisper", "other"), logits(row, row))).containsExactly(5, 2);
        // 4 is allowed again once a token was accepted; 2 stays suppressed
        assertThat(step(s, List.of("whisper"), logits(row))).containsExactly(4);
        s.suppress("whisper", new int[0]);
        assertThat(step(s, List.of("whisper"), logits(row))).containsExactly(2);
    }

    @Test
    void thePenaltyIsSignAware() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).penalty(4.0).build());
        s.restore("a", new int[] {0, 1}, new int[0]);
        // seen: 0 at -1 becomes -4 (below 2's -3); 1 at 2 becomes 0.5 (below 3's 1)
        float[] row = {-1f, 2f, -3f, 1f, -9f, -9f, -9f, -9f};

        assertThat(step(s, List.of("a"), logits(row))).containsExactly(3);
        s.ingestRequest("b", cfg().temperature(0).penalty(1.5).build());
        s.restore("b", new int[] {0, 1}, new int[0]);
        // 2 / 1.5 = 1.33 still beats 1; -1 * 1.5 = -1.5 still beats -3
        assertThat(step(s, List.of("b"), logits(row))).containsExactly(1);
    }

    @Test
    void generatedTokensArePenalisedAndThePromptOnlyWhenAsked() {
        SamplerResource s = sampler();
        s.ingestRequest("prompt-free", cfg().temperature(0).penalty(10.0).penalizePrompt(false).build());
        float[] row = {0f, 3f, 2f, 0f, 0f, 0f, 0f, 0f};
        SamplerStep prompt = new SamplerStep(null, true, true, Map.of("prompt-free", new int[] {1}), null);

        assertThat(step(s, prompt, List.of("prompt-free"), logits(row))).containsExactly(1);
        // now 1 was generated: 3 / 10 < 2
        assertThat(step(s, List.of("prompt-free"), logits(row))).containsExactly(2);
    }

    @Test
    void theWindowFormCountsRepeatsAmongTheLastGeneratedTokens() {
        SamplerResource s = sampler();
        s.ingestRequest("w4", cfg().temperature(0).penalty(2.0).window(4).build());
        s.ingestRequest("w1", cfg().temperature(0).penalty(2.0).window(1).build());
        // the prompt does not count in the window form
        s.restore("w4", new int[] {2}, new int[] {1, 1});
        s.restore("w1", new int[] {2}, new int[] {1, 1});
        float[] row = {0f, 4f, 1.5f, 0f, 0f, 0f, 0f, 0f};

        // w4: 4 / 2^2 = 1 < 1.5; w1: only the last 1 counts, 4 / 2 = 2 > 1.5
        assertThat(step(s, List.of("w4", "w1"), logits(row, row))).containsExactly(2, 1);
    }

    @Test
    void aStepCanTurnThePenaltyOff() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).penalty(10.0).build());
        s.restore("a", new int[] {1}, new int[0]);
        float[] row = {0f, 3f, 2f, 0f, 0f, 0f, 0f, 0f};

        assertThat(step(s, new SamplerStep(null, false, true, Map.of(), null), List.of("a"), logits(row)))
                .containsExactly(1);
    }

    // ---------------------------------------------------------------- filters on a known distribution

    @Test
    void withoutFiltersEveryTokenOfTheDistributionIsDrawn() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).seed(7).build());

        int[] h = histogram(draws(s, "a", KNOWN, 400));

        assertThat(h[0]).isPositive();
        assertThat(h[1]).isPositive();
        assertThat(h[2]).isPositive();
        assertThat(h[3]).isPositive();
    }

    @Test
    void topKKeepsTheKMostLikely() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).topK(2).seed(7).build());

        assertThat(support(draws(s, "a", KNOWN, 400))).containsExactlyInAnyOrder(0, 1);
    }

    @Test
    void topPKeepsTheSmallestPrefixReachingP() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).topP(0.65).seed(7).build());

        // 0.4 + 0.3 = 0.7 >= 0.65
        assertThat(support(draws(s, "a", KNOWN, 400))).containsExactlyInAnyOrder(0, 1);
    }

    @Test
    void minPDropsTokensBelowItsShareOfTheMaximum() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).minP(0.6).seed(7).build());

        // threshold 0.6 * 0.4 = 0.24
        assertThat(support(draws(s, "a", KNOWN, 400))).containsExactlyInAnyOrder(0, 1);
    }

    @Test
    void minPNeverDropsTheArgmaxOfAGreedyRow() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).minP(1.0).build());

        assertThat(draws(s, "a", KNOWN, 3)).containsOnly(0);
    }

    @Test
    void aStepCanTurnTheFiltersOff() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).topK(1).seed(7).build());
        SamplerStep noFilters = new SamplerStep(null, true, false, Map.of(), null);
        Tensor l = logits(KNOWN);
        int[] tokens = new int[200];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = step(s, noFilters, List.of("a"), l)[0];
        }

        assertThat(support(tokens)).contains(0, 1, 2);
    }

    @Test
    void drawsFollowTheFilteredDistribution() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).topK(3).seed(1234).build());
        int n = 3000;

        int[] h = histogram(draws(s, "a", KNOWN, n));

        // top-3 renormalised: [4/9, 3/9, 2/9]; chi-square with 2 degrees of freedom, 0.1% critical value 13.82
        double[] expected = {4.0 / 9, 3.0 / 9, 2.0 / 9};
        double chi2 = 0;
        for (int t = 0; t < 3; t++) {
            double e = expected[t] * n;
            chi2 += (h[t] - e) * (h[t] - e) / e;
        }
        assertThat(h[3] + h[4] + h[5] + h[6] + h[7]).isZero();
        assertThat(chi2).isLessThan(13.82);
    }

    // ---------------------------------------------------------------- min_tokens

    @Test
    void stopIdsAreHeldBackUntilMinTokens() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).minTokens(5).seed(3).build());
        float[] eosLikely = logitsOf(0.97, 0.01, 0.01, 0.01);

        int[] first = draws(s, "a", eosLikely, 5);
        int[] after = draws(s, "a", eosLikely, 20);

        assertThat(first).doesNotContain(0);
        assertThat(after).contains(0);
    }

    @Test
    void aRequestsOwnStopIdsAreMaskedForItAlone() {
        SamplerResource s = sampler();
        s.ingestRequest("holds-3", cfg().temperature(1).minTokens(50).seed(1).build());
        s.ingestRequest("holds-2", cfg().temperature(1).minTokens(50).seed(2).build());
        s.ingestRequest("free", cfg().temperature(1).seed(3).build());
        s.setStopIds("holds-3", new int[] {3});
        s.setStopIds("holds-2", new int[] {2});
        s.setStopIds("free", new int[] {2, 3});
        float[] row = logitsOf(0.02, 0.02, 0.48, 0.48);
        Tensor l = logits(row, row, row);
        List<int[]> tokens = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            tokens.add(step(s, List.of("holds-3", "free", "holds-2"), l));
        }

        assertThat(tokens.stream().mapToInt(t -> t[0])).doesNotContain(0, 3).contains(2);
        assertThat(tokens.stream().mapToInt(t -> t[1])).contains(2, 3);
        assertThat(tokens.stream().mapToInt(t -> t[2])).doesNotContain(0, 2).contains(3);
    }

    // ---------------------------------------------------------------- determinism and offsets

    @Test
    void aRequestsTokenDependsOnItsSeedAndPositionNotOnItsBatch() {
        float[] flat = logitsOf(0.2, 0.2, 0.2, 0.2, 0.1, 0.1);
        float[] other = logitsOf(0.9, 0.1);
        SamplerResource alone = sampler();
        alone.ingestRequest("x", cfg().temperature(1).seed(42).build());
        SamplerResource crowded = sampler();
        crowded.ingestRequest("y", cfg().temperature(0.7).topK(1).seed(5).build());
        crowded.ingestRequest("x", cfg().temperature(1).seed(42).build());
        crowded.ingestRequest("z", cfg().temperature(1).penalty(1.3).seed(42).build());

        List<Integer> expected = new ArrayList<>();
        List<Integer> inBatches = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            expected.add(step(alone, List.of("x"), logits(flat))[0]);
            List<String> rids = switch (i % 3) {
                case 0 -> List.of("y", "x", "z");
                case 1 -> List.of("x", "z");
                default -> List.of("z", "y", "x");
            };
            float[][] rows = rids.stream().map(r -> r.equals("x") ? flat : other).toArray(float[][]::new);
            int[] tokens = step(crowded, rids, logits(rows));
            inBatches.add(tokens[rids.indexOf("x")]);
        }

        assertThat(inBatches).isEqualTo(expected);
        assertThat(new HashSet<>(expected)).hasSizeGreaterThan(1);
    }

    @Test
    void offsetsAdvanceOncePerKeptRow() {
        SamplerResource s = sampler();
        s.ingestRequest("kept", cfg().seed(1).build());
        s.ingestRequest("dropped", cfg().seed(2).build());
        SamplerStep onlyKept = new SamplerStep(null, true, true, Map.of(), Set.of("kept"));

        step(s, onlyKept, List.of("kept", "dropped"), logits(KNOWN, KNOWN));
        step(s, onlyKept, List.of("kept", "dropped"), logits(KNOWN, KNOWN));

        assertThat(s.generated("kept")).isEqualTo(2);
        assertThat(s.generated("dropped")).isZero();
    }

    @Test
    void anExplicitAcceptIsNotCountedAgainByCommit() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().seed(1).build());
        StepContext ctx = new StepContext(List.of("a"), "decode", 0, false);
        SamplerStep st = new SamplerStep();
        s.plan(st, ctx);
        int token = s.sample(List.of("a"), logits(KNOWN))[0];

        s.accept("a", token);
        s.commit(st, ctx);

        assertThat(s.generated("a")).isEqualTo(1);
    }

    @Test
    void aDroppedDrawIsRedrawnAtTheSameOffset() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(1).seed(9).build());
        SamplerStep dropAll = new SamplerStep(null, true, true, Map.of(), Set.of());
        float[] flat = logitsOf(0.25, 0.25, 0.25, 0.25);

        int first = step(s, dropAll, List.of("a"), logits(flat))[0];
        int again = step(s, dropAll, List.of("a"), logits(flat))[0];

        assertThat(again).isEqualTo(first);
    }

    @Test
    void restoreContinuesTheStreamWhereItStopped() {
        float[] flat = logitsOf(0.25, 0.25, 0.2, 0.2, 0.1);
        SamplingReqConfig config = cfg().temperature(1).penalty(1.2).seed(77).build();
        int[] prompt = {3, 4};
        SamplerResource original = sampler();
        original.ingestRequest("a", config);
        StepContext ctx = new StepContext(List.of("a"), "prefill", 0, false);
        original.plan(new SamplerStep(null, true, true, Map.of("a", prompt), null), ctx);
        original.commit(new SamplerStep(), ctx);
        int[] run = draws(original, "a", flat, 8);

        SamplerResource resumed = sampler();
        resumed.ingestRequest("a", config);
        resumed.restore("a", prompt, Arrays.copyOf(run, 5));

        assertThat(resumed.generated("a")).isEqualTo(5);
        assertThat(draws(resumed, "a", flat, 3)).containsExactly(run[5], run[6], run[7]);
    }

    @Test
    void unknownRowsDrawWithDefaultsAndLeaveNoState() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).build());
        StepContext ctx = new StepContext(List.of("a"), "decode", 0, false);
        ctx.setPaddedRequestIds(List.of("a", "-1"));
        SamplerStep st = new SamplerStep();
        s.plan(st, ctx);

        int[] tokens = s.sample(List.of("a", "-1"), logits(KNOWN, KNOWN));
        s.commit(st, ctx);

        assertThat(tokens[0]).isZero();
        assertThat(s.generated("a")).isEqualTo(1);
        assertThatThrownBy(() -> s.generated("-1")).hasMessageContaining("not ingested");
    }

    @Test
    void aRequestAppearsOnceInABatch() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().build());

        assertThatThrownBy(() -> s.sample(List.of("a", "a"), logits(KNOWN, KNOWN))).hasMessageContaining("twice");
        assertThatThrownBy(() -> s.sample(List.of("a"), logits(KNOWN, KNOWN))).hasMessageContaining("2 rows for 1");
    }

    // ---------------------------------------------------------------- requests

    @Test
    void validationAtIngestNamesTheField() {
        SamplerResource s = sampler();
        SamplerResource noMinP = new SamplerResource(new SamplerSpec("sampler", Set.of("llm"), VOCAB), device);

        assertThatThrownBy(() -> s.ingestRequest("a", cfg().topP(0).build()))
                .isInstanceOfSatisfying(RequestValidationException.class, e -> assertThat(e.field()).isEqualTo("top_p"));
        assertThatThrownBy(() -> s.ingestRequest("a", cfg().temperature(-1).build()))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo("temperature"));
        assertThatThrownBy(() -> s.ingestRequest("a", cfg().window(5).build()))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo("repetition_window"));
        assertThatThrownBy(() -> noMinP.ingestRequest("a", cfg().minP(0.1).build()))
                .isInstanceOfSatisfying(RequestValidationException.class, e -> assertThat(e.field()).isEqualTo("min_p"));
        assertThatThrownBy(() -> noMinP.ingestRequest("a", cfg().minTokens(2).build()))
                .isInstanceOfSatisfying(RequestValidationException.class,
                        e -> assertThat(e.field()).isEqualTo("min_tokens"));
        assertThatThrownBy(() -> s.generated("a")).hasMessageContaining("not ingested");
    }

    @Test
    void ingestIsIdempotentAndKeepsProgress() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().temperature(0).build());
        draws(s, "a", KNOWN, 2);

        s.ingestRequest("a", cfg().temperature(1).build());

        assertThat(s.generated("a")).isEqualTo(2);
        assertThat(draws(s, "a", KNOWN, 5)).containsOnly(0);
    }

    @Test
    void resetRewindsProgressAndRemoveForgets() {
        SamplerResource s = sampler();
        s.ingestRequest("a", cfg().build());
        draws(s, "a", KNOWN, 2);

        s.resetRequest("a", false);
        assertThat(s.generated("a")).isZero();
        s.removeRequest("a");
        s.removeRequest("never-seen");
        assertThatThrownBy(() -> s.setStopIds("a", new int[] {1})).hasMessageContaining("not ingested");
    }

    @Test
    void eachSamplerOfARequestHasItsOwnStream() {
        long a = SamplerResource.deriveSeed(42, "sampler");
        long b = SamplerResource.deriveSeed(42, "sampler_audio");

        assertThat(a).isEqualTo(SamplerResource.deriveSeed(42, "sampler")).isNotEqualTo(b);
        assertThat(a).isNotNegative();
        assertThat(b).isNotNegative();
    }

    private static Set<Integer> support(int[] tokens) {
        Set<Integer> s = new HashSet<>();
        for (int t : tokens) {
            s.add(t);
        }
        return s;
    }

    /** Named parameters over the defaults. */
    private static final class Cfg {
        private double temperature = 0.6;
        private int topK;
        private double topP = 1.0;
        private double penalty = 1.0;
        private double minP;
        private int window;
        private int minTokens;
        private boolean penalizePrompt = true;
        private long seed;

        Cfg temperature(double v) { temperature = v; return this; }
        Cfg topK(int v) { topK = v; return this; }
        Cfg topP(double v) { topP = v; return this; }
        Cfg penalty(double v) { penalty = v; return this; }
        Cfg minP(double v) { minP = v; return this; }
        Cfg window(int v) { window = v; return this; }
        Cfg minTokens(int v) { minTokens = v; return this; }
        Cfg penalizePrompt(boolean v) { penalizePrompt = v; return this; }
        Cfg seed(long v) { seed = v; return this; }

        SamplingReqConfig build() {
            return new SamplingReqConfig(temperature, topK, topP, false, penalty, minP, window, minTokens, false, 1,
                    penalizePrompt, seed);
        }
    }
}
