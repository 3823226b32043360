package org.mstar.engine;

import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import org.mstar.device.Device;
import org.mstar.device.DeviceMemory;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelCost;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.runner.KvPoolDType;

/**
 * Builds a Llama-family engine sized for its device ({@link EngineSizing}). On a GPU the activation reserve is
 * measured first, vLLM-style: a probe engine with a small KV pool runs a decode step at the largest graph bucket
 * (recording its graph) and a prefill at the token budget, and what the device's memory grew by beyond the probe's
 * own pool is the reserve. A bucket's graph holds temporaries in proportion to its rows (the logits are shared),
 * so the decode part less the logits counts again for the smaller buckets' rows over the largest's. An engine with
 * LoRA adapters decodes the probe once more with an adapter, which records the adapter variant of the largest
 * bucket's graph too, and its adapter slots, allocated with the engine, join the reserve. It is measured once per
 * weights and engine shape in a process. Without device memory of its own (the CPU) the defaults stand, overridden by
 * what was set.
 */
public final class EngineSizer {
    /** Sized engines open on each GPU of this process (by device name), so that engines sharing one split it. */
    private static final Map<String, Integer> OPEN = new ConcurrentHashMap<>();
    /** Measured reserves by weights and (rows, budget, longest sequence, page size, adapters). */
    private static final Map<LlamaWeights, Map<List<Object>, Long>> RESERVES =
            Collections.synchronizedMap(new WeakHashMap<>());

    private EngineSizer() {}

    /** An engine and what it was sized to. */
    public record Sized(LlamaEngine engine, EngineSizing sizing) {}

    /**
     * @param defaults the engine's options where nothing is sized (the CPU); on a GPU its rows, budget and pages are
     *                 replaced by the sizing
     */
    public static Sized build(Path modelDir, LlamaWeights weights, EngineOptions defaults, EngineSizing.Request request) {
        return build(modelDir, weights, weights.device(), defaults, request, 1);
    }

    /**
     * @param device          the weights' device, or a view of it with the kernel options this engine computes with
     * @param enginesOnDevice engines of the job that share this GPU: each sizes its pool to its part of the room the
     *                        ones already open left (call inside the device's turn, so they size one after the other)
     */
    public static Sized build(Path modelDir, LlamaWeights weights, Device device, EngineOptions defaults,
            EngineSizing.Request request, int enginesOnDevice) {
        if (device.memory().isEmpty()) {
            EngineSizing sizing = new EngineSizing(request.maxBatchRows().orElse(defaults.maxBatchRows()),
                    request.tokenBudget().orElse(defaults.tokenBudget()),
                    request.pages().orElse(defaults.kvCache().maxNumPages()),
                    "defaults of a device without memory of its own");
            return new Sized(LlamaEngineLoader.load(modelDir, weights, device, resized(defaults, sizing)), sizing);
        }
        DeviceMemory memory = device.memory().orElseThrow();
        int rows = EngineSizing.rows(request, memory.totalBytes());
        int budget = EngineSizing.tokenBudget(request, memory.totalBytes());
        // a task restarted over the same weights builds its engine again: the reserve is measured once
        long reserve = RESERVES.computeIfAbsent(weights, w -> new ConcurrentHashMap<>()).computeIfAbsent(
                List.of(rows, budget, defaults.kvCache().maxSeqLen(), defaults.kvCache().pageSize(),
                        String.valueOf(defaults.adapters())),
                k -> measureReserve(modelDir, weights, device, defaults, rows, budget));
        memory = device.memory().orElseThrow();
        ModelConfig c = weights.config();
        int pageSize = defaults.kvCache().pageSize();
        long pageBytes = ModelCost.kvPageBytes(c, pageSize, KvPoolDType.of(defaults.kvCache().cacheDType(), weights.dtype()));
        String key = device.name();
        int toBuild = Math.max(1, enginesOnDevice - OPEN.getOrDefault(key, 0));
        EngineSizing sizing = EngineSizing.size(request, new EngineSizing.Device(memory.totalBytes(),
                memory.usedBytes(), weights.byteSize(), reserve, pageBytes, pageSize, 1.0 / toBuild));
        LlamaEngine engine = LlamaEngineLoader.load(modelDir, weights, device, resized(defaults, sizing));
        OPEN.merge(key, 1, Integer::sum);
        engine.own(() -> OPEN.merge(key, -1, Integer::sum));
        return new Sized(engine, sizing);
    }

    private static EngineOptions resized(EngineOptions o, EngineSizing s) {
        KvCacheOptions kv = o.kvCache().toBuilder().maxNumPages(s.pages()).build();
        return new EngineOptions(s.maxBatchRows(), s.tokenBudget(), kv, o.decodeGraphs(), o.scheduling(),
                o.role(), o.preplan(), o.launchAhead(), o.adapters());
    }

    /** Device memory a decode step at {@code rows} and a prefill at {@code budget} tokens take beyond the KV pool. */
    private static long measureReserve(Path modelDir, LlamaWeights weights, Device device, EngineOptions o, int rows,
            int budget) {
        int pageSize = o.kvCache().pageSize();
        int maxSeqLen = Math.min(o.kvCache().maxSeqLen(), weights.config().maxPositionEmbeddings());
        int promptLen = Math.max(1, Math.min(budget, maxSeqLen - 1));
        int prompts = (budget + promptLen - 1) / promptLen;
        int pages = prompts * (promptLen / pageSize + 2) + 2 * rows + 2;
        EngineOptions probeOptions = resized(o, new EngineSizing(rows, budget, pages, "probe"));
        device.releaseCachedMemory();
        LlamaEngine probe = LlamaEngineLoader.load(modelDir, weights, device, probeOptions);
        try {
            long built = used(device);
            int vocab = weights.config().vocabSize();
            // the largest graph (a decode step of more rows than any graph runs eagerly, within the prefill's room)
            int graphRows = DecodeGraphs.largestBucket(rows);
            for (int i = 0; i < graphRows; i++) {
                probe.submit(request("probe-decode-" + i, new int[] {3 + i % (vocab - 3)}, 2, null));
            }
            drain(probe);
            String adapter = probe.anyAdapter();
            if (adapter != null) {
                for (int i = 0; i < graphRows; i++) {
                    probe.submit(request("probe-adapter-" + i, new int[] {3 + i % (vocab - 3)}, 2, adapter));
                }
                drain(probe);
            }
            long decode = used(device) - built;
            for (int p = 0; p < prompts; p++) {
                int[] ids = new int[promptLen];
                for (int i = 0; i < promptLen; i++) {
                    ids[i] = 3 + (p * 7919 + i) % (vocab - 3);
                }
                probe.submit(request("probe-prefill-" + p, ids, 1, null));
            }
            drain(probe);
            long all = used(device) - built;
            // the smaller buckets' graphs hold temporaries in proportion to their rows; the logits are shared
            long perGraph = Math.max(0, decode - DecodeGraphs.logitsBytes(graphRows, vocab));
            return all + perGraph * DecodeGraphs.rowsOfSmallerBuckets(graphRows) / graphRows
                    + probe.adapterPoolBytes();
        } finally {
            probe.close();
            device.releaseCachedMemory();
        }
    }

    private static GenerationRequest request(String id, int[] prompt, int maxTokens, String adapter) {
        return GenerationRequest.builder(id).promptTokenIds(prompt).sampling(SamplingReqConfig.greedy())
                .maxTokens(maxTokens).ignoreEos(true).adapter(adapter).build();
    }

    private static void drain(LlamaEngine engine) {
        while (engine.hasWork()) {
            StepResult step = engine.step();
            if (!step.failures().isEmpty()) {
                throw new IllegalStateException("the sizing probe failed: " + step.failures());
            }
        }
    }

    private static long used(Device device) {
        device.synchronize();
        return device.memory().orElseThrow().usedBytes();
    }
}
