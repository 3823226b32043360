package org.mstar.device.cuda.harness;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.mstar.device.DType;
import org.mstar.device.MoeRouting;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.LatentAttention;
import org.mstar.model.ModelConfig;
import org.mstar.model.MoeConfig;

/**
 * The harness's whole-model section runs without a GPU when the candidate is a second CPU device: fp32 must
 * then agree exactly and the CPU's own bf16 path must stay within the bf16 tolerance.
 */
class EngineChecksTest {
    @Test
    void cpuCandidatePassesEveryCheck(@TempDir Path dir) throws Exception {
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            EngineChecks checks = new EngineChecks(reference, candidate, small(), 3);
            List<CheckResult> results = checks.run(dir);

            assertThat(results).hasSize(11).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
            assertThat(results.get(0).error()).isZero();
            assertThat(results.get(1).error()).isZero();
            // decode graphs against the same device's eager engine: on the CPU a replay re-runs the ops
            assertThat(results.subList(3, 7)).allSatisfy(r -> assertThat(r.error()).isZero());
            // pre-planned decode steps against the same engine planning inline: nothing a step computes changes
            assertThat(results.subList(7, 9)).allSatisfy(r -> assertThat(r.error()).isZero());
            // and launched before the step before them is accepted: nothing changes either
            assertThat(results.subList(9, 11)).allSatisfy(r -> assertThat(r.error()).isZero());
            assertThat(checks.notes()).containsPattern("decode steps launched ahead, bf16: [1-9]\\d* of");
            assertThat(checks.notes()).containsPattern("pre-planned decode steps, bf16: PreplanCounts\\[staged=\\d+, "
                    + "promoted=[1-9]");
            assertThat(checks.notes()).doesNotContain(": 0 decode steps replayed");
            assertThat(checks.notes()).contains("192 of 192 tokens equal");
        }
    }

    /** The same with the architectures whose forwards differ from Llama's, scaled down from {@code geometries()}. */
    @ParameterizedTest
    @EnumSource(value = Architecture.class, names = {"QWEN3", "GEMMA3", "PHI3", "QWEN3_MOE", "OLMOE"})
    void otherArchitecturesPassOnACpuCandidate(Architecture arch, @TempDir Path dir) throws Exception {
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            EngineChecks checks = new EngineChecks(reference, candidate, scaledDown(arch), 5);
            List<CheckResult> results = checks.run(dir);

            assertThat(results).hasSize(11).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
            assertThat(results.get(1).error()).isZero();
        }
    }

    @Test
    void gemma3WithASeparateWindowedCachePassesOnACpuCandidate(@TempDir Path dir) throws Exception {
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            EngineChecks checks = new EngineChecks(reference, candidate, scaledDown(Architecture.GEMMA3), 5, 160);
            List<CheckResult> results = checks.run(dir);

            assertThat(results).hasSize(11).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
            assertThat(results.get(1).shape()).contains("windowed cache");
        }
    }

    /**
     * DeepSeek-V2's latent attention and experts, scaled down from {@code geometries()}: a dense layer, then a sparse
     * one of 8 routed experts in 4 groups (top 2 of the best 2 groups, scaled) and a shared expert.
     */
    @Test
    void deepseekV2PassesOnACpuCandidate(@TempDir Path dir) throws Exception {
        ModelConfig big = EngineChecks.geometries().stream().filter(c -> c.architecture() == Architecture.DEEPSEEK_V2)
                .findFirst().orElseThrow();
        MoeRouting routing = big.moe().orElseThrow().routing();
        MoeConfig moe = new MoeConfig(8, 32, new MoeRouting(routing.scoring(), 2, false, 4, 2,
                routing.routedScalingFactor()), List.of(false, true), 32);
        ModelConfig small = big.toBuilder().hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(4)
                .headDim(16).latentAttention(new LatentAttention(0, 32, 16, 16, 16)).vocabSize(320)
                .maxPositionEmbeddings(1024).moe(moe).build();
        try (CpuDevice reference = new CpuDevice(2); CpuDevice candidate = new CpuDevice(2)) {
            List<CheckResult> results = new EngineChecks(reference, candidate, small, 5).run(dir);

            assertThat(results).hasSize(11).allSatisfy(r -> assertThat(r.passed()).as(r.toString()).isTrue());
        }
    }

    /** A Llama small enough for the CPU to play both devices. */
    static ModelConfig small() {
        return ModelConfig.builder(Architecture.LLAMA)
                .hiddenSize(64).intermediateSize(128).numLayers(2).numHeads(4).numKvHeads(2).headDim(16)
                .ropeTheta(10_000).maxPositionEmbeddings(1024).vocabSize(320).bosTokenId(0).eosTokenId(1)
                .dtype(DType.F32).build();
    }

    private static ModelConfig scaledDown(Architecture arch) {
        ModelConfig big = EngineChecks.geometries().stream().filter(c -> c.architecture() == arch).findFirst().orElseThrow();
        int layers = big.windowedLayers().isEmpty() ? 2 : big.windowedLayers().size();
        // OLMoE's experts are intermediate_size wide
        int width = arch == Architecture.OLMOE ? 128 : 32;
        MoeConfig moe = big.moe().map(m -> new MoeConfig(8, width, m.routing(), m.sparseLayers().subList(0, layers)))
                .orElse(null);
        return big.toBuilder().moe(moe).hiddenSize(64).intermediateSize(128).numLayers(layers).numHeads(4).numKvHeads(2)
                .headDim(16).vocabSize(320)
                .slidingWindow(big.slidingWindow() == 0 ? 0 : 40, 0).maxPositionEmbeddings(1024)
                .queryPreAttnScalar(arch == Architecture.GEMMA3 ? 24 : 0).build();
    }
}
