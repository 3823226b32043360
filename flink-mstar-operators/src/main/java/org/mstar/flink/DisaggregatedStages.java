package org.mstar.flink;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.mstar.engine.EngineRole;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;
import org.mstar.schemas.Response;

/**
 * The generation stage of a disaggregated pipeline: keyBy(request id) → {@link PrefillOperator} → hand-off records
 * keyBy(request id) → {@link DecodeOperator}; each operator with its own engine factory, device and parallelism.
 */
final class DisaggregatedStages {
    static final String PREFILL_UID = "mstar-prefill";
    static final String DECODE_UID = "mstar-decode";

    private final EngineFactory prefillEngines;
    private final EngineFactory decodeEngines;
    private final GenerateSettings prefillSettings;
    private final GenerateSettings decodeSettings;
    private final int maxRecordBytes;
    private final Integer prefillParallelism;
    private final Integer decodeParallelism;
    private final String decodeSlotSharingGroup;

    DisaggregatedStages(Configuration options, EngineFactory prefillEngines, EngineFactory decodeEngines) {
        this.prefillEngines = prefillEngines;
        this.decodeEngines = decodeEngines;
        this.prefillSettings = GenerateSettings.from(side(options, DisaggregationOptions.PREFILL_DEVICE,
                EngineRole.PREFILL));
        this.decodeSettings = GenerateSettings.from(side(options, DisaggregationOptions.DECODE_DEVICE,
                EngineRole.DECODE));
        long recordBytes = options.get(DisaggregationOptions.HANDOFF_RECORD_SIZE).getBytes();
        if (recordBytes < 1 || recordBytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("'" + DisaggregationOptions.HANDOFF_RECORD_SIZE.key()
                    + "' must be between 1 byte and 2 GiB, got " + recordBytes);
        }
        this.maxRecordBytes = (int) recordBytes;
        this.prefillParallelism = options.getOptional(DisaggregationOptions.PREFILL_PARALLELISM).orElse(null);
        this.decodeParallelism = options.getOptional(DisaggregationOptions.DECODE_PARALLELISM).orElse(null);
        this.decodeSlotSharingGroup = options.getOptional(DisaggregationOptions.DECODE_SLOT_SHARING_GROUP)
                .orElse(null);
        for (Integer p : new Integer[] {prefillParallelism, decodeParallelism}) {
            if (p != null && p < 1) {
                throw new IllegalArgumentException("prefill and decode parallelism must be >= 1, got " + p);
            }
        }
    }

    /**
     * The job's options as one side sees them: its device (when set) and its engine role, so an engine factory built
     * from them ({@link EngineFactory#fromConfig}) builds that side's engines.
     */
    static Configuration side(Configuration options, ConfigOption<String> device, EngineRole role) {
        Configuration c = new Configuration(options);
        options.getOptional(device).ifPresent(d -> c.set(GenerateOptions.DEVICE, d));
        c.set(DisaggregationOptions.ENGINE_ROLE, role);
        if (sharesOneGpu(options) && options.getOptional(LlamaEngineOptions.ENGINES_PER_DEVICE).isEmpty()) {
            c.set(LlamaEngineOptions.ENGINES_PER_DEVICE, 2);
        }
        return c;
    }

    /** Whether both sides run on the same one GPU, so their engines split its memory. */
    private static boolean sharesOneGpu(Configuration options) {
        String device = options.get(GenerateOptions.DEVICE);
        String prefill = DeviceAssignment.validate(
                options.getOptional(DisaggregationOptions.PREFILL_DEVICE).orElse(device));
        String decode = DeviceAssignment.validate(
                options.getOptional(DisaggregationOptions.DECODE_DEVICE).orElse(device));
        return prefill.equals(decode) && DeviceAssignment.listedGpus(prefill) == 1;
    }

    /** Responses of both operators: the prefill's first tokens (and requests that end there), the decode's rest. */
    DataStream<Response> addTo(DataStream<GenerateRequest> valid) {
        SingleOutputStreamOperator<Response> prefilled = valid
                .keyBy(GenerateRequest::getRequestId, Types.STRING)
                .transform("mstar prefill", new AvroTypeInfo<>(Response.class),
                        new PrefillOperatorFactory(prefillEngines, prefillSettings, maxRecordBytes))
                .uid(PREFILL_UID);
        if (prefillParallelism != null) {
            prefilled.setParallelism(prefillParallelism);
        }
        SingleOutputStreamOperator<Response> decoded = prefilled.getSideOutput(PrefillOperator.HANDOFFS)
                .keyBy(KvHandoff::getRequestId, Types.STRING)
                .transform("mstar decode", new AvroTypeInfo<>(Response.class),
                        new DecodeOperatorFactory(decodeEngines, decodeSettings))
                .uid(DECODE_UID);
        if (decodeParallelism != null) {
            decoded.setParallelism(decodeParallelism);
        }
        if (decodeSlotSharingGroup != null) {
            decoded.slotSharingGroup(decodeSlotSharingGroup);
        }
        return prefilled.union(decoded);
    }

    Integer decodeParallelism() {
        return decodeParallelism;
    }
}
