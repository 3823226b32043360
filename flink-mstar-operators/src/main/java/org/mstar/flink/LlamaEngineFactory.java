package org.mstar.flink;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.time.Duration;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.mstar.device.Device;
import org.mstar.device.DeviceGroup;
import org.mstar.device.KernelOptions;
import org.mstar.device.UnsupportedOnDeviceException;
import org.mstar.engine.AdapterOptions;
import org.mstar.engine.EngineOptions;
import org.mstar.engine.EngineRole;
import org.mstar.engine.EngineSizer;
import org.mstar.engine.EngineSizing;
import org.mstar.engine.ForwardingEngine;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.LlamaEngine;
import org.mstar.engine.LlamaEngineLoader;
import org.mstar.engine.SchedulerOptions;
import org.mstar.engine.SchedulingPolicy;
import org.mstar.model.HybridConfig;
import org.mstar.model.WeightQuantization;
import org.mstar.model.llama.KvCacheOptions;
import org.mstar.model.llama.LoadProgress;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.resources.KVCacheDType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds a {@code LlamaEngine} (Llama, Qwen2, Mistral checkpoints in Hugging Face layout) on each subtask's device,
 * from the model folder {@link GenerateOptions#MODEL_DIR} and the knobs of {@link LlamaEngineOptions}. The default
 * {@link GenerateOptions#ENGINE_FACTORY}. A Whisper folder ({@code model_type: whisper}) is served by a
 * {@link WhisperEngineFactory} instead, and a Mamba2 or Bamba folder (config.json's architecture) by a
 * {@link HybridEngineFactory}.
 */
@PublicEvolving
public final class LlamaEngineFactory implements EngineFactory {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LlamaEngineFactory.class);

    private final String modelDir;
    private final int maxBatchRows;
    private final int tokenBudget;
    private final int maxSeqLen;
    private final int pages;
    /** Set explicitly (null: sized from the device on a GPU, the option's default on the CPU). */
    private final Integer setRows;
    private final Integer setBudget;
    private final Integer setPages;
    private final double memoryFraction;
    private final int enginesPerDevice;
    private final int pageSize;
    private final int cpuOffloadPages;
    private final boolean prefixCache;
    private final int windowedLayerPages;
    private final boolean decodeGraphs;
    private final boolean preplan;
    private final boolean launchAhead;
    private final boolean batchInvariant;
    private final KVCacheDType kvCacheDType;
    private final WeightQuantization quantization;
    private final int tensorParallel;
    private final SchedulingPolicy schedulingPolicy;
    private final Duration priorityAging;
    private final Duration maxPrefillStall;
    private final EngineRole role;
    /** Hand-offs by handle between the engines of one device ({@link DisaggregationOptions#SAME_DEVICE_HANDOFF}). */
    private final boolean sameDeviceHandoff;
    private final boolean networkHandoff;
    private final String networkHost;
    private final long networkRetained;
    /** Null when the job serves no adapters. */
    private final String adaptersDir;
    private final int adapterSlots;
    /** Set when the model folder is a Whisper checkpoint: that factory builds the engines. */
    private final WhisperEngineFactory whisper;
    /** Set when the model folder is a Mamba2 or Bamba checkpoint: that factory builds the engines. */
    private final HybridEngineFactory hybrid;

    /** @throws IllegalArgumentException when {@link GenerateOptions#MODEL_DIR} is not set */
    public LlamaEngineFactory(ReadableConfig config) {
        this.modelDir = config.getOptional(GenerateOptions.MODEL_DIR).orElseThrow(() -> new IllegalArgumentException(
                "No model: set '" + GenerateOptions.MODEL_DIR.key() + "' to a model folder (config.json, safetensors,"
                        + " tokenizer.json)."));
        this.maxBatchRows = config.get(LlamaEngineOptions.MAX_BATCH_ROWS);
        this.tokenBudget = config.get(LlamaEngineOptions.TOKEN_BUDGET);
        this.maxSeqLen = config.get(LlamaEngineOptions.MAX_SEQ_LEN);
        this.pages = config.get(LlamaEngineOptions.PAGES);
        this.setRows = config.getOptional(LlamaEngineOptions.MAX_BATCH_ROWS).orElse(null);
        this.setBudget = config.getOptional(LlamaEngineOptions.TOKEN_BUDGET).orElse(null);
        this.setPages = config.getOptional(LlamaEngineOptions.PAGES).orElse(null);
        this.memoryFraction = config.get(LlamaEngineOptions.GPU_MEMORY_FRACTION);
        this.enginesPerDevice = config.get(LlamaEngineOptions.ENGINES_PER_DEVICE);
        this.pageSize = config.get(LlamaEngineOptions.PAGE_SIZE);
        this.cpuOffloadPages = config.get(LlamaEngineOptions.CPU_OFFLOAD_PAGES);
        this.prefixCache = config.get(LlamaEngineOptions.PREFIX_CACHE);
        this.windowedLayerPages = config.get(LlamaEngineOptions.WINDOWED_LAYER_PAGES);
        this.decodeGraphs = config.get(LlamaEngineOptions.DECODE_GRAPHS);
        this.preplan = config.get(LlamaEngineOptions.PREPLAN);
        this.launchAhead = config.get(LlamaEngineOptions.LAUNCH_AHEAD);
        this.batchInvariant = config.get(LlamaEngineOptions.BATCH_INVARIANT);
        this.kvCacheDType = KVCacheDType.parse(config.get(LlamaEngineOptions.KV_CACHE_DTYPE));
        if (kvCacheDType != KVCacheDType.AUTO && batchInvariant) {
            // the FP8 pool's decode kernel cuts its slices by the batch, as the bf16 CUDA-core one does
            throw new IllegalArgumentException("'" + LlamaEngineOptions.KV_CACHE_DTYPE.key() + "' = "
                    + kvCacheDType.optionValue() + " has no batch-invariant attention kernels: it cannot be set with '"
                    + LlamaEngineOptions.BATCH_INVARIANT.key() + "'");
        }
        this.quantization = WeightQuantization.parse(config.get(LlamaEngineOptions.QUANTIZATION));
        this.tensorParallel = config.get(LlamaEngineOptions.TENSOR_PARALLEL);
        this.schedulingPolicy = config.get(LlamaEngineOptions.SCHEDULING_POLICY);
        this.priorityAging = config.get(LlamaEngineOptions.PRIORITY_AGING);
        this.maxPrefillStall = config.get(LlamaEngineOptions.MAX_PREFILL_STALL);
        this.role = config.get(DisaggregationOptions.ENGINE_ROLE);
        this.sameDeviceHandoff = config.get(DisaggregationOptions.SAME_DEVICE_HANDOFF);
        this.networkHandoff = config.get(DisaggregationOptions.NETWORK_HANDOFF);
        this.networkHost = config.getOptional(DisaggregationOptions.NETWORK_HANDOFF_HOST).orElse(null);
        this.networkRetained = config.get(DisaggregationOptions.NETWORK_HANDOFF_RETAINED).getBytes();
        if (sameDeviceHandoff && networkHandoff) {
            throw new IllegalArgumentException("'" + DisaggregationOptions.SAME_DEVICE_HANDOFF.key() + "' and '"
                    + DisaggregationOptions.NETWORK_HANDOFF.key() + "' exclude each other: choose one");
        }
        this.adaptersDir = config.getOptional(LlamaEngineOptions.ADAPTERS_DIR).orElse(null);
        this.adapterSlots = config.get(LlamaEngineOptions.ADAPTER_SLOTS);
        this.whisper = WhisperConfig.isWhisper(Path.of(modelDir)) ? new WhisperEngineFactory(config) : null;
        this.hybrid = HybridConfig.isHybrid(Path.of(modelDir)) ? new HybridEngineFactory(config) : null;
        options(); // rejects invalid knobs where the job is built, not on the TaskManagers
        sizingRequest();
    }

    /**
     * An engine over this process's shared copy of the weights on {@code device} (see {@link SharedModels}), taking
     * the device's {@link DeviceTurn} for every call that may run device work.
     *
     * @throws SuppressRestartsException when the device cannot run the model at all: a restart would fail the same
     *     way, so the job fails once with the reason instead of restarting forever
     */
    @Override
    public GenerationEngine create(String device, int subtaskIndex) {
        if (whisper != null) {
            return whisper.create(device, subtaskIndex);
        }
        if (hybrid != null) {
            return hybrid.create(device, subtaskIndex);
        }
        if (tensorParallel > 1) {
            return createParallel(device, subtaskIndex);
        }
        try {
            SharedModels.Loaded shared = SharedModels.get(Path.of(modelDir), device, quantization);
            DeviceTurn turn = shared.turn();
            // a view with this job's numerics: the device is shared with the other engines of this TaskManager
            Device view = turn.device().withOptions(turn.device().options().withBatchInvariant(batchInvariant));
            // graphs only pay where launches cost host time; on the CPU a replay just re-runs the ops
            EngineOptions options = options().withDecodeGraphs(decodeGraphs && view.isCuda());
            EngineSizer.Sized sized = turn.call(() -> EngineSizer.build(Path.of(modelDir), shared.weights(), view,
                    options, sizingRequest(), enginesPerDevice));
            EngineSizing s = sized.sizing();
            LOG.info("Engine of subtask {} on {}: {} rows, {} tokens a step, {} KV pages of {} tokens, {}; {}",
                    subtaskIndex, device, s.maxBatchRows(), s.tokenBudget(), s.pages(), pageSize, options.decodeGraphs()
                            ? "decode graphs for 1 to " + s.largestDecodeGraph() + " rows" : "no decode graphs",
                    s.reason());
            if (sameDeviceHandoff && role != EngineRole.COLOCATED) {
                sized.engine().lendOnDevice(SharedModels.shelf());
            }
            if (networkHandoff && role != EngineRole.COLOCATED) {
                sized.engine().handOffOverNetwork(SharedModels.kvBytesServer(networkHost(), networkRetained));
            }
            return turn.guard(sized.engine(), DeviceTurn.Precedence.of(role));
        } catch (UnsupportedOnDeviceException e) {
            throw new SuppressRestartsException(new IllegalArgumentException(
                    "Model " + modelDir + " cannot be served on " + device + ": " + e.getMessage(), e));
        }
    }

    /**
     * An engine over {@code tensorParallel} devices from {@code device} on, which this subtask owns alone (no weights
     * shared with other subtasks); the engine closes the group when it closes.
     */
    private GenerationEngine createParallel(String device, int subtaskIndex) {
        DeviceGroup group = DeviceGroup.open(device, tensorParallel,
                KernelOptions.defaults().withBatchInvariant(batchInvariant));
        try {
            LlamaEngine engine = LlamaEngineLoader.load(Path.of(modelDir), group, options(), quantization,
                    LoadProgress.NONE);
            LOG.info("Engine of subtask {} over {} devices from {}: {} rows, {} tokens a step, {} KV pages of {} tokens",
                    subtaskIndex, tensorParallel, device, maxBatchRows, tokenBudget, pages, pageSize);
            return new DeviceTurn(group.device(0)).guard(new GroupOwner(engine, group), DeviceTurn.Precedence.of(role));
        } catch (UnsupportedOnDeviceException e) {
            group.close();
            throw new SuppressRestartsException(new IllegalArgumentException(
                    "Model " + modelDir + " cannot be served on " + device + ": " + e.getMessage(), e));
        } catch (RuntimeException e) {
            group.close();
            throw e;
        }
    }

    /** An engine that closes its device group after itself. */
    private static final class GroupOwner extends ForwardingEngine {
        private final DeviceGroup group;

        GroupOwner(GenerationEngine engine, DeviceGroup group) {
            super(engine);
            this.group = group;
        }

        @Override
        public void close() {
            try {
                engine.close();
            } finally {
                group.close();
            }
        }
    }

    private String networkHost() {
        if (networkHost != null) {
            return networkHost;
        }
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (UnknownHostException e) {
            throw new IllegalStateException("this machine's address is unknown: set '"
                    + DisaggregationOptions.NETWORK_HANDOFF_HOST.key() + "'", e);
        }
    }

    private EngineSizing.Request sizingRequest() {
        return EngineSizing.Request.of(setRows, setBudget, setPages, memoryFraction);
    }

    private EngineOptions options() {
        return new EngineOptions(maxBatchRows, tokenBudget,
                KvCacheOptions.builder().maxSeqLen(maxSeqLen).maxNumPages(pages).pageSize(pageSize)
                        .cpuOffloadPages(cpuOffloadPages).prefixCache(prefixCache)
                        .windowedLayerPages(windowedLayerPages).cacheDType(kvCacheDType).build(), false,
                new SchedulerOptions(schedulingPolicy, priorityAging, maxPrefillStall,
                        SchedulerOptions.DEFAULTS.minPrefillChunk()), role, preplan, launchAhead,
                adaptersDir == null ? null : new AdapterOptions(Path.of(adaptersDir), adapterSlots));
    }
}
