package org.mstar.jobs;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.mstar.device.Device;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineRole;
import org.mstar.engine.EngineSizer;
import org.mstar.engine.EngineSizing;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.StepResult;
import org.mstar.flink.DeviceTurn;
import org.mstar.flink.EngineFactory;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.resources.KVCacheDType;

/**
 * The pipeline benchmark's engines: each over the weights of {@link BenchModels} (made once per process), taking
 * the device's turn like the operator's default factory. For the failover run it fails the task at given step
 * numbers, counted over the whole process so that each failure happens once, and it logs device memory and build
 * time at every engine build and close.
 */
final class BenchEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;

    /** Engine steps run in this process by engines of each role, over restarts. */
    private static final Map<EngineRole, AtomicLong> STEPS = new ConcurrentHashMap<>();
    private static final List<String> EVENTS = Collections.synchronizedList(new ArrayList<>());
    /** What the last sized engine built in this process was sized to. */
    private static volatile EngineSizing lastSizing;

    private final String modelDir;
    private final Long randomSeed;
    // EngineOptions is not serializable; the factory travels in the job graph
    private final int maxBatchRows;
    private final int tokenBudget;
    private final int maxSeqLen;
    private final int pages;
    private final int pageSize;
    private final KVCacheDType kvCacheDType;
    private final EngineRole role;
    private final Set<Long> failAtSteps;
    /** Rows, budget and pages set for a sized engine (null: sized from the device); unused unless {@link #sized}. */
    private final Integer setRows;
    private final Integer setBudget;
    private final Integer setPages;
    private final double memoryFraction;
    private final boolean sized;
    private final boolean batchInvariant;
    /** The options' adapters folder and slots (null: none). */
    private final String adaptersDir;
    private final int adapterSlots;
    /** Hand-offs by handle with the other engines of the device ({@link LlamaEngine#lendOnDevice}). */
    private final boolean sameDeviceHandoff;

    /** @param batchInvariant batch-invariant numerics for these engines (a view of the shared device with them) */
    BenchEngineFactory(Path modelDir, Long randomSeed, EngineOptions options, Set<Long> failAtSteps,
            boolean batchInvariant) {
        this(modelDir, randomSeed, options, failAtSteps, null, false, batchInvariant, false);
    }

    /** @param sameDeviceHandoff prefill or decode engines handing off by handle through the process's shelf */
    BenchEngineFactory(Path modelDir, Long randomSeed, EngineOptions options, Set<Long> failAtSteps,
            boolean batchInvariant, boolean sameDeviceHandoff) {
        this(modelDir, randomSeed, options, failAtSteps, null, false, batchInvariant, sameDeviceHandoff);
    }

    /** Engines sized for their device as {@code serve} sizes them ({@link EngineSizer}), over {@code defaults}. */
    BenchEngineFactory(Path modelDir, Long randomSeed, EngineOptions defaults, EngineSizing.Request sizing) {
        this(modelDir, randomSeed, defaults, Set.of(), sizing, true, false, false);
    }

    private BenchEngineFactory(Path modelDir, Long randomSeed, EngineOptions options, Set<Long> failAtSteps,
            EngineSizing.Request sizing, boolean sized, boolean batchInvariant, boolean sameDeviceHandoff) {
        this.modelDir = modelDir.toString();
        this.randomSeed = randomSeed;
        this.maxBatchRows = options.maxBatchRows();
        this.tokenBudget = options.tokenBudget();
        this.maxSeqLen = options.kvCache().maxSeqLen();
        this.pages = options.kvCache().maxNumPages();
        this.pageSize = options.kvCache().pageSize();
        this.kvCacheDType = options.kvCache().cacheDType();
        this.role = options.role();
        this.failAtSteps = Set.copyOf(failAtSteps);
        this.setRows = sized ? boxed(sizing.maxBatchRows()) : null;
        this.setBudget = sized ? boxed(sizing.tokenBudget()) : null;
        this.setPages = sized ? boxed(sizing.pages()) : null;
        this.memoryFraction = sized ? sizing.memoryFraction() : EngineSizing.DEFAULT_MEMORY_FRACTION;
        this.sized = sized;
        this.batchInvariant = batchInvariant;
        this.adaptersDir = options.adapters() == null ? null : options.adapters().folder().toString();
        this.adapterSlots = options.adapters() == null ? 0 : options.adapters().slots();
        this.sameDeviceHandoff = sameDeviceHandoff;
    }

    private static Integer boxed(OptionalInt value) {
        return value.isPresent() ? value.getAsInt() : null;
    }

    static EngineSizing lastSizing() {
        return lastSizing;
    }

    /** What happened at each engine build and close, in order (device memory, weights reuse, build time). */
    static List<String> events() {
        synchronized (EVENTS) {
            return List.copyOf(EVENTS);
        }
    }

    /** @return the steps of each role counted since the last reset */
    static Map<EngineRole, Long> resetSteps() {
        Map<EngineRole, Long> steps = new EnumMap<>(EngineRole.class);
        STEPS.forEach((role, n) -> steps.put(role, n.getAndSet(0)));
        return steps;
    }

    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        int loadsBefore = BenchModels.loads();
        long start = System.nanoTime();
        BenchModels.Loaded shared = BenchModels.get(Path.of(modelDir), randomSeed, device);
        DeviceTurn turn = shared.turn();
        Device view = turn.device().withOptions(turn.device().options().withBatchInvariant(batchInvariant));
        long before = turn.call(() -> BenchModels.memoryInUse(turn));
        EngineOptions options = new EngineOptions(maxBatchRows, tokenBudget,
                KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(pageSize)
                        .cacheDType(kvCacheDType).build())
                .withDecodeGraphs(view.isCuda())
                .withRole(role)
                .withAdapters(adaptersDir == null ? null : new AdapterOptions(Path.of(adaptersDir), adapterSlots));
        LlamaEngine engine;
        if (sized) {
            EngineSizer.Sized built = turn.call(() -> EngineSizer.build(Path.of(modelDir), shared.weights(), view,
                    options, sizingRequest(), 1));
            lastSizing = built.sizing();
            engine = built.engine();
        } else {
            engine = turn.call(() -> LlamaEngineLoader.load(Path.of(modelDir), shared.weights(), view, options));
        }
        if (sameDeviceHandoff) {
            engine.lendOnDevice(BenchModels.shelf());
        }
        long after = turn.call(() -> BenchModels.memoryInUse(turn));
        EVENTS.add(String.format(Locale.ROOT,
                "engine built on %s in %d ms (weights %s); device memory %s before, %s after",
                Thread.currentThread().getName(), (System.nanoTime() - start) / 1_000_000,
                BenchModels.loads() > loadsBefore ? "made in " + shared.loadMillis() + " ms" : "reused from the cache",
                PipelineBench.gib(before), PipelineBench.gib(after)));
        return turn.guard(new Failing(engine, turn), DeviceTurn.Precedence.of(role));
    }

    private EngineSizing.Request sizingRequest() {
        return EngineSizing.Request.of(setRows, setBudget, setPages, memoryFraction);
    }

    /** Fails the task at the configured steps and logs memory after close. */
    private final class Failing extends ForwardingEngine {
        private final DeviceTurn turn;

        Failing(GenerationEngine engine, DeviceTurn turn) {
            super(engine);
            this.turn = turn;
        }

        @Override
        public StepResult step() {
            long step = STEPS.computeIfAbsent(role, r -> new AtomicLong()).incrementAndGet();
            if (failAtSteps.contains(step)) {
                EVENTS.add("injected failure at " + role.name().toLowerCase(Locale.ROOT) + " step " + step);
                throw new IllegalStateException("injected task failure at engine step " + step);
            }
            return engine.step();
        }

        @Override
        public void close() {
            engine.close();
            // inside the turn already: the guard takes it for close()
            EVENTS.add("engine closed on " + Thread.currentThread().getName() + "; device memory "
                    + PipelineBench.gib(BenchModels.memoryInUse(turn)));
        }
    }
}
