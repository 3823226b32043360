package org.mstar.flink;

import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.MemorySize;
import org.mstar.engine.EngineRole;

/**
 * Knobs of disaggregated serving: prefill and decode as separate operators, each with its own engines, devices and
 * parallelism, the prefill operator handing every request's KV to the decode operator as {@code KvHandoff} records.
 */
@PublicEvolving
public final class DisaggregationOptions {
    private DisaggregationOptions() {}

    public static final ConfigOption<Boolean> ENABLED = ConfigOptions.key("mstar.disaggregation.enabled")
            .booleanType()
            .defaultValue(false)
            .withDescription("Run prefill and decode in separate operators. Off: one generate operator serves whole"
                    + " requests.");

    public static final ConfigOption<EngineRole> ENGINE_ROLE = ConfigOptions.key("mstar.engine.role")
            .enumType(EngineRole.class)
            .defaultValue(EngineRole.COLOCATED)
            .withDescription("Which part of a request's life the engines of 'mstar.engine.factory' serve. The"
                    + " disaggregated pipeline sets it per operator; leave it unset.");

    public static final ConfigOption<MemorySize> HANDOFF_RECORD_SIZE =
            ConfigOptions.key("mstar.disaggregation.handoff-record-size")
                    .memoryType()
                    .defaultValue(MemorySize.parse("1mb"))
                    .withDescription("Most KV bytes in one hand-off record; a larger hand-off is split into several"
                            + " records, reassembled in the decode operator's keyed state.");

    public static final ConfigOption<Integer> PREFILL_PARALLELISM =
            ConfigOptions.key("mstar.disaggregation.prefill.parallelism")
                    .intType()
                    .noDefaultValue()
                    .withDescription("Subtasks of the prefill operator (one per GPU); default: the job's.");

    public static final ConfigOption<Integer> DECODE_PARALLELISM =
            ConfigOptions.key("mstar.disaggregation.decode.parallelism")
                    .intType()
                    .noDefaultValue()
                    .withDescription("Subtasks of the decode operator and the sink (one per GPU); default: the job's.");

    public static final ConfigOption<String> PREFILL_DEVICE = ConfigOptions.key("mstar.disaggregation.prefill.device")
            .stringType()
            .noDefaultValue()
            .withDescription("Device of the prefill engines (as 'mstar.engine.device': cpu, cuda:N, a list or"
                    + " auto); default: 'mstar.engine.device'.");

    public static final ConfigOption<String> DECODE_DEVICE = ConfigOptions.key("mstar.disaggregation.decode.device")
            .stringType()
            .noDefaultValue()
            .withDescription("Device of the decode engines (as 'mstar.engine.device': cpu, cuda:N, a list or"
                    + " auto); default: 'mstar.engine.device'.");

    public static final ConfigOption<Boolean> SAME_DEVICE_HANDOFF =
            ConfigOptions.key("mstar.disaggregation.same-device-handoff")
                    .booleanType()
                    .defaultValue(false)
                    .withDescription("Hand KV off by handle between the prefill and decode engines of one"
                            + " TaskManager, on one device or on two of its devices: the prefill engine lends its"
                            + " pages, a record carries a ticket, and the decode engine copies the pages device to"
                            + " device (pool to pool on one device; a peer copy from the other GPU); a hand-off that"
                            + " reaches another TaskManager is recomputed there. Turn on only where both sides share"
                            + " TaskManagers.");

    public static final ConfigOption<Boolean> NETWORK_HANDOFF =
            ConfigOptions.key("mstar.disaggregation.network-handoff")
                    .booleanType()
                    .defaultValue(false)
                    .withDescription("Hand KV off by ticket between TaskManagers: the prefill engine offers the KV"
                            + " bytes on a TCP server of its TaskManager, a record carries the ticket (address, id,"
                            + " length), and the decode engine pulls the bytes, checks their checksum and copies them"
                            + " into its pool; bytes that cannot be pulled (the prefill TaskManager died) are"
                            + " recomputed. Not with 'mstar.disaggregation.same-device-handoff'.");

    public static final ConfigOption<String> NETWORK_HANDOFF_HOST =
            ConfigOptions.key("mstar.disaggregation.network-handoff.host")
                    .stringType()
                    .noDefaultValue()
                    .withDescription("Address the TaskManager's KV server listens on and names in its tickets;"
                            + " default: this machine's address (InetAddress.getLocalHost()).");

    public static final ConfigOption<MemorySize> NETWORK_HANDOFF_RETAINED =
            ConfigOptions.key("mstar.disaggregation.network-handoff.retained")
                    .memoryType()
                    .defaultValue(MemorySize.parse("2gb"))
                    .withDescription("Most KV bytes a TaskManager holds for pulls not yet made (on its heap); past"
                            + " it the oldest are dropped, and their decode side recomputes them. The newest hand-off"
                            + " is held whatever its size.");

    public static final ConfigOption<String> DECODE_SLOT_SHARING_GROUP =
            ConfigOptions.key("mstar.disaggregation.decode.slot-sharing-group")
                    .stringType()
                    .noDefaultValue()
                    .withDescription("Slot sharing group of the decode operator; default: its input's. A group of its"
                            + " own puts decode subtasks in slots of their own, so with one slot per TaskManager the"
                            + " prefill and decode sides run in different TaskManagers.");
}
