package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;

/**
 * One request whose serving throws (here: at its first sampled token, mid-batch) fails alone with a 500; every
 * other request of its batches completes with exactly the tokens of a run without it, and no KV page is lost.
 */
class EngineFaultIsolationTest {

    @Test
    void aPoisonRequestFailsAloneAndTheOthersKeepTheirTokens(@TempDir Path dir) throws Exception {
        try (CpuDevice cpu = new CpuDevice(2); LlamaModel model = RandomModels.load(RandomModels.llama(), 9, dir, cpu)) {
            Random rnd = new Random(4);
            List<GenerationRequest> good = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                good.add(GenerationRequest.builder("good" + i).promptTokenIds(RandomModels.prompt(rnd, 6 + 5 * i))
                        .sampling(SamplingReqConfig.DEFAULTS.withTemperature(0.8).withSeed(i)).maxTokens(12)
                        .ignoreEos(true).build());
            }
            GenerationRequest poison = GenerationRequest.builder("poison").promptTokenIds(RandomModels.prompt(rnd, 9))
                    .sampling(SamplingReqConfig.DEFAULTS.withSeed(77)).maxTokens(12).ignoreEos(true).build();

            EngineDriver clean = run(model, good, null);
            EngineDriver poisoned = run(model, good, poison);

            assertThat(poisoned.failures).singleElement().satisfies(f -> {
                assertThat(f.requestId()).isEqualTo("poison");
                assertThat(f.code()).isEqualTo(500);
                assertThat(f.message()).contains("cannot sample this request");
            });
            assertThat(poisoned.finished.keySet()).containsExactlyInAnyOrderElementsOf(clean.finished.keySet());
            for (GenerationRequest r : good) {
                assertThat(poisoned.tokens.get(r.requestId())).as(r.requestId()).isEqualTo(clean.tokens.get(r.requestId()));
            }
        }
    }

    private static EngineDriver run(LlamaModel model, List<GenerationRequest> good, GenerationRequest poison) {
        try (LlamaEngine engine = RandomModels.engine(model, RandomModels.options(8, 64, 200, 4, 0))) {
            engine.observeLogits((rid, index, logits) -> {
                if (rid.equals("poison")) {
                    throw new IllegalStateException("cannot sample this request");
                }
            });
            good.subList(0, 3).forEach(engine::submit);
            if (poison != null) {
                engine.submit(poison);
            }
            good.subList(3, good.size()).forEach(engine::submit);
            EngineDriver d = new EngineDriver();
            d.drain(engine, 2_000);
            engine.runner().resources().values().stream()
                    .filter(r -> r instanceof org.mstar.resources.kv.KVManager)
                    .forEach(r -> ((org.mstar.resources.kv.KVManager) r).assertPagesConserved());
            return d;
        }
    }
}
