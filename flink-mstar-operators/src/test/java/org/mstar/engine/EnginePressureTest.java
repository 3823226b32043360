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

/** 64 requests against a page pool a quarter of what they need all complete, as if unconstrained. */
class EnginePressureTest {

    @Test
    void quarterSizedPoolCompletesEveryRequestWithIdenticalOutputs(@TempDir Path dir) throws Exception {
        try (CpuDevice cpu = new CpuDevice(2); LlamaModel model = RandomModels.load(RandomModels.qwen2(), 21, dir, cpu)) {
            Random rnd = new Random(1);
            List<GenerationRequest> requests = new ArrayList<>();
            int pagesNeeded = 0;
            for (int i = 0; i < 64; i++) {
                int[] prompt = RandomModels.prompt(rnd, 8 + rnd.nextInt(17));
                SamplingReqConfig s = SamplingReqConfig.DEFAULTS.withTemperature(0.7).withSeed(i);
                requests.add(GenerationRequest.builder("q" + i).promptTokenIds(prompt).sampling(s).maxTokens(8)
                        .ignoreEos(true).build());
                pagesNeeded += (prompt.length + 8 + 3) / 4;
            }
            EngineDriver free = drive(model, RandomModels.options(32, 128, pagesNeeded + 1, 4, 0), requests);
            EngineDriver tight = drive(model, RandomModels.options(32, 128, pagesNeeded / 4 + 1, 4, 0), requests);
            assertThat(tight.failures).isEmpty();
            assertThat(tight.finished).hasSize(64);
            assertThat(tight.tokens).isEqualTo(free.tokens);
        }
    }

    private static EngineDriver drive(LlamaModel model, EngineOptions options, List<GenerationRequest> requests) {
        try (LlamaEngine engine = RandomModels.engine(model, options)) {
            EngineDriver d = new EngineDriver();
            requests.forEach(engine::submit);
            d.drain(engine, 20_000);
            if (options.kvCache().maxNumPages() < 200) {
                assertThat(engine.stats().preemptions()).isPositive();
            }
            return d;
        }
    }
}
