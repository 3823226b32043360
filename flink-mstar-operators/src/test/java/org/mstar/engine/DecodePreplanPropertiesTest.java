package org.mstar.engine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.SamplingReqConfig;

/**
 * Over random arrival schedules, lengths, stop ids, sampling and pool sizes, pre-planning decode steps changes no
 * token, finish or failure, and leaks no KV page (see {@link DecodePreplanTest#onMatchesOff}).
 */
class DecodePreplanPropertiesTest {
    private static Path dir;
    private static CpuDevice cpu;
    private static LlamaModel model;

    @BeforeContainer
    static void load() throws Exception {
        dir = Files.createTempDirectory("mstar-preplan");
        cpu = new CpuDevice(2);
        model = RandomModels.load(RandomModels.llama(), 9, dir, cpu);
    }

    @AfterContainer
    static void close() throws Exception {
        model.close();
        cpu.close();
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    /** One request: when it arrives, its prompt and output lengths, whether it has stop ids, its sampling. */
    record Spec(int arrival, int promptLength, int maxTokens, boolean stops, boolean random) {}

    record Load(List<Spec> requests, int rows, int budget, int extraPages, long seed) {}

    @Provide
    Arbitrary<Load> loads() {
        Arbitrary<Spec> spec = Combinators.combine(Arbitraries.integers().between(0, 12),
                Arbitraries.integers().between(1, 20), Arbitraries.integers().between(1, 10),
                Arbitraries.of(true, false), Arbitraries.of(true, false)).as(Spec::new);
        return Combinators.combine(spec.list().ofMinSize(1).ofMaxSize(7), Arbitraries.integers().between(1, 5),
                Arbitraries.integers().between(4, 40), Arbitraries.integers().between(0, 30),
                Arbitraries.longs()).as(Load::new);
    }

    @Property(tries = 60)
    void preplanningChangesNoOutput(@ForAll("loads") Load load) {
        Random rnd = new Random(load.seed());
        List<Integer> stopIds = List.of(2 + rnd.nextInt(RandomModels.VOCAB - 2), 2 + rnd.nextInt(RandomModels.VOCAB - 2),
                2 + rnd.nextInt(RandomModels.VOCAB - 2));
        List<DecodePreplanTest.Arrival> arrivals = new ArrayList<>();
        int largest = 1;
        for (int i = 0; i < load.requests().size(); i++) {
            Spec s = load.requests().get(i);
            SamplingReqConfig sampling = s.random()
                    ? SamplingReqConfig.DEFAULTS.withTemperature(1.0).withSeed(rnd.nextLong())
                    : SamplingReqConfig.greedy();
            arrivals.add(new DecodePreplanTest.Arrival(s.arrival(), DecodePreplanTest.request("r" + i,
                    RandomModels.prompt(rnd, s.promptLength()), sampling, s.maxTokens(), s.stops() ? stopIds : List.of())));
            largest = Math.max(largest, (s.promptLength() + s.maxTokens() + 3) / 4);
        }
        // the largest request fits alone; the rest may have to be preempted
        EngineOptions options = RandomModels.options(load.rows(), load.budget(), largest + load.extraPages() + 1, 4, 0);
        DecodePreplanTest.onMatchesOff(model, options, arrivals);
    }
}
