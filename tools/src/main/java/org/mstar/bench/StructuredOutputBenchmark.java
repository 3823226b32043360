package org.mstar.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalInt;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.tokenizer.ByteLevelBpeTokenizerJson;
import org.mstar.model.tokenizer.TokenBytes;
import org.mstar.resources.constraint.AllowedTokens;
import org.mstar.resources.constraint.ConstraintCache;
import org.mstar.resources.constraint.ConstraintCompiler;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.resources.constraint.TokenAutomaton;
import org.mstar.resources.constraint.TokenVocabulary;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Structured output over a 128,256-token byte-level vocabulary (Llama 3's size; the synthetic tokenizer of random
 * checkpoints):
 * <ul>
 *   <li>{@code compile}: a constraint the engine has not seen — JSON schema or regex to the token automaton, with
 *       the start state's mask;</li>
 *   <li>{@code coldRequest}: compile plus the mask of every state one output passes through (a fixed random
 *       output of the language), i.e. all the constraint work of the first request with a new schema;</li>
 *   <li>{@code cachedLookup}: the same constraint again, from the cache;</li>
 *   <li>{@code maskBatch64}: the per-step host work, the allowed-token bitmask of 64 constrained rows whose states'
 *       masks are known (they were computed off the critical path when the previous token was accepted);</li>
 *   <li>{@code maskLogitsCpu64}: the CPU reference of the maskLogits op on 64 rows (the GPU kernel is timed by the
 *       GPU harness).</li>
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class StructuredOutputBenchmark {
    static final int VOCAB = 128_256;
    static final int BATCH = 64;

    /** flat: an object of scalars; nested: objects in arrays, enums, bounded strings; regex: a date-time pattern. */
    @Param({"flat", "nested", "regex"})
    String constraint;

    private Path dir;
    private TokenVocabulary vocab;
    private OutputConstraint oc;
    private ConstraintCache cache;
    /** States one random output of the language passes through, in order. */
    private int[] path;
    private List<TokenAutomaton> rowAutomata;
    private int[] rowStates;
    private List<String> rowNames;
    private CpuDevice cpu;
    private Tensor logits;
    private Tensor allowed;

    @Setup
    public void setUp() throws IOException {
        dir = Files.createTempDirectory("mstar-structured-bench");
        Path file = dir.resolve("tokenizer.json");
        Files.writeString(file, ByteLevelBpeTokenizerJson.create(VOCAB, OptionalInt.of(128_000), List.of(128_001))
                .toString());
        vocab = new TokenVocabulary(TokenBytes.read(file, VOCAB), List.of(128_001));
        oc = switch (constraint) {
            case "flat" -> OutputConstraint.jsonSchema("""
                    {"type":"object","properties":{"name":{"type":"string","maxLength":32},"age":{"type":"integer"},
                     "score":{"type":"number"},"active":{"type":"boolean"}},"required":["name","age"]}""");
            case "nested" -> OutputConstraint.jsonSchema("""
                    {"type":"object","properties":{
                      "id":{"type":"string","maxLength":16},
                      "kind":{"enum":["order","refund","query","complaint"]},
                      "items":{"type":"array","maxItems":8,"items":{"type":"object","properties":{
                         "sku":{"type":"string","maxLength":12},"qty":{"type":"integer"},"price":{"type":"number"}},
                         "required":["sku","qty"]}},
                      "customer":{"type":"object","properties":{"name":{"type":"string","maxLength":40},
                         "vip":{"type":"boolean"}},"required":["name"]}},
                     "required":["id","kind","items"]}""");
            default -> OutputConstraint.regex("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?(Z|[+-]\\d{2}:\\d{2})");
        };
        TokenAutomaton a = ConstraintCompiler.compile(oc, vocab);
        path = randomPath(a, new Random(1));
        cache = new ConstraintCache(vocab, 4);
        cache.get(oc);
        rowAutomata = new ArrayList<>(Collections.nCopies(BATCH, a));
        rowStates = new int[BATCH];
        rowNames = new ArrayList<>();
        for (int r = 0; r < BATCH; r++) {
            rowStates[r] = path[r % path.length];
            rowNames.add("r" + r);
        }
        cpu = new CpuDevice(2);
        float[] l = new float[BATCH * VOCAB];
        Random rnd = new Random(2);
        for (int i = 0; i < l.length; i++) {
            l[i] = rnd.nextFloat();
        }
        logits = cpu.fromFloats(l, DType.F32, BATCH, VOCAB);
        int[] bits = AllowedTokens.bitmask(rowAutomata, rowStates, rowNames, VOCAB);
        allowed = cpu.fromInts(bits, BATCH, bits.length / BATCH);
    }

    /** The states of one output: from the start, a random allowed text token each step until the output is done. */
    private static int[] randomPath(TokenAutomaton a, Random rnd) {
        List<Integer> states = new ArrayList<>();
        int s = a.start();
        while (states.size() < 400) {
            states.add(s);
            if (!a.continues(s) || a.accepting(s) && rnd.nextInt(8) == 0) {
                break;
            }
            int[] mask = a.mask(s);
            List<Integer> text = new ArrayList<>();
            for (int id = 0; id < a.vocabularySize(); id++) {
                if ((mask[id >>> 5] >>> (id & 31) & 1) != 0 && id != 128_001) {
                    text.add(id);
                }
            }
            s = a.next(s, text.get(rnd.nextInt(text.size())));
        }
        return states.stream().mapToInt(Integer::intValue).toArray();
    }

    @TearDown
    public void tearDown() throws IOException {
        logits.close();
        allowed.close();
        cpu.close();
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    @Benchmark
    public TokenAutomaton compile() {
        return ConstraintCompiler.compile(oc, vocab);
    }

    @Benchmark
    public int coldRequest() {
        TokenAutomaton a = ConstraintCompiler.compile(oc, vocab);
        int sum = 0;
        for (int s : path) {
            sum += a.mask(s)[0];
        }
        return sum;
    }

    @Benchmark
    public TokenAutomaton cachedLookup() {
        return cache.get(oc);
    }

    @Benchmark
    public int[] maskBatch64() {
        return AllowedTokens.bitmask(rowAutomata, rowStates, rowNames, VOCAB);
    }

    @Benchmark
    public Tensor maskLogitsCpu64() {
        cpu.ops().maskLogits(logits, allowed);
        return logits;
    }
}
