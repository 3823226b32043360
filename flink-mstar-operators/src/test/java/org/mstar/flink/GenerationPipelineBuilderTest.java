package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.junit.jupiter.api.Test;

class GenerationPipelineBuilderTest {
    private static final EngineFactory ENGINE = new FakeEngineFactory(2, Duration.ZERO);

    @Test
    void buildNamesEveryMissingSetting() {
        assertThatThrownBy(() -> GenerationPipeline.builder().build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("bootstrapServers(..)").hasMessageContaining("mstar.kafka.bootstrap-servers")
                .hasMessageContaining("No model").hasMessageContaining("mstar.model.dir")
                .hasMessageContaining("transactional-id prefix");
    }

    @Test
    void rejectsContradictions() {
        assertThatThrownBy(() -> valid().deliveryGuarantee(DeliveryGuarantee.NONE).build())
                .hasMessageContaining("EXACTLY_ONCE or AT_LEAST_ONCE");
        assertThatThrownBy(() -> valid().responsesTopic("requests").build()).hasMessageContaining("share topic");
        assertThatThrownBy(() -> valid().set(GenerateOptions.MAX_WAITING, 0).build())
                .hasMessageContaining("mstar.engine.max-waiting");
        assertThatThrownBy(() -> valid().set(GenerateOptions.DEVICE, "tpu").build())
                .hasMessageContaining("mstar.engine.device");
    }

    @Test
    void atLeastOnceNeedsNeitherTransactionalPrefixNorCheckpointing() {
        GenerationPipeline pipeline = GenerationPipeline.builder().bootstrapServers("localhost:9092").engineFactory(ENGINE)
                .deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE).build();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        pipeline.addTo(env);
        assertThat(env.getStreamGraph().getStreamNodes()).extracting(StreamNode::getTransformationUID)
                .contains(GenerationPipeline.SOURCE_UID, GenerationPipeline.VALIDATE_UID,
                        GenerationPipeline.GENERATE_UID, GenerationPipeline.SINK_UID);
    }

    @Test
    void theDefaultEngineIsLlamaServingTheModelFolder() {
        assertThat(GenerateOptions.ENGINE_FACTORY.defaultValue()).isEqualTo(LlamaEngineFactory.class.getName());
        assertThat(valid().engineFactory(null).set(GenerateOptions.MODEL_DIR, "/models/m").build().engineFactory())
                .isInstanceOf(LlamaEngineFactory.class);
        assertThatThrownBy(() -> valid().engineFactory(null).build()).hasMessageContaining("No model");
        assertThatThrownBy(() -> valid().engineFactory(null).set(GenerateOptions.MODEL_DIR, "/models/m")
                .set(LlamaEngineOptions.PAGES, 1).build()).hasMessageContaining("invalid KV cache options");
    }

    @Test
    void engineFactoryComesFromConfigurationByClassName() {
        Configuration conf = new Configuration();
        conf.set(KafkaIoOptions.BOOTSTRAP_SERVERS, "localhost:9092");
        conf.set(KafkaIoOptions.TRANSACTIONAL_ID_PREFIX, "tx");
        conf.set(GenerateOptions.ENGINE_FACTORY, FakeEngineFactory.class.getName());
        assertThat(GenerationPipeline.builder().configure(conf).build().engineFactory())
                .isInstanceOf(FakeEngineFactory.class);

        conf.set(GenerateOptions.ENGINE_FACTORY, "java.lang.String");
        assertThatThrownBy(() -> GenerationPipeline.builder().configure(conf).build())
                .hasMessageContaining("is not an EngineFactory");
    }

    @Test
    void disaggregatedHasPrefillAndDecodeOperatorsAtTheirOwnParallelism() {
        GenerationPipeline pipeline = GenerationPipeline.builder().bootstrapServers("localhost:9092")
                .deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE).disaggregated(true)
                .prefillEngineFactory(ENGINE).decodeEngineFactory(ENGINE)
                .set(DisaggregationOptions.PREFILL_PARALLELISM, 1).set(DisaggregationOptions.DECODE_PARALLELISM, 3)
                .build();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(2);
        pipeline.addTo(env);
        var nodes = env.getStreamGraph().getStreamNodes();
        assertThat(nodes).extracting(StreamNode::getTransformationUID)
                .contains(DisaggregatedStages.PREFILL_UID, DisaggregatedStages.DECODE_UID)
                .doesNotContain(GenerationPipeline.GENERATE_UID);
        assertThat(nodes).filteredOn(n -> DisaggregatedStages.PREFILL_UID.equals(n.getTransformationUID()))
                .singleElement().extracting(StreamNode::getParallelism).isEqualTo(1);
        assertThat(nodes).filteredOn(n -> DisaggregatedStages.DECODE_UID.equals(n.getTransformationUID()))
                .singleElement().extracting(StreamNode::getParallelism).isEqualTo(3);
        assertThat(nodes).filteredOn(n -> GenerationPipeline.SINK_UID.equals(n.getTransformationUID()))
                .singleElement().extracting(StreamNode::getParallelism).isEqualTo(3);
    }

    @Test
    void aDecodeSlotSharingGroupPutsDecodeInSlotsOfItsOwnAndLeavesPrefillWithItsInput() {
        GenerationPipeline pipeline = GenerationPipeline.builder().bootstrapServers("localhost:9092")
                .deliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE).disaggregated(true)
                .prefillEngineFactory(ENGINE).decodeEngineFactory(ENGINE)
                .set(DisaggregationOptions.DECODE_SLOT_SHARING_GROUP, "decode").build();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        pipeline.addTo(env);
        var nodes = env.getStreamGraph().getStreamNodes();
        assertThat(nodes).filteredOn(n -> DisaggregatedStages.DECODE_UID.equals(n.getTransformationUID()))
                .singleElement().extracting(StreamNode::getSlotSharingGroup).isEqualTo("decode");
        assertThat(nodes).filteredOn(n -> DisaggregatedStages.PREFILL_UID.equals(n.getTransformationUID()))
                .singleElement().extracting(StreamNode::getSlotSharingGroup).isEqualTo("default");
    }

    @Test
    void networkAndSameDeviceHandOffsExcludeEachOther() {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.MODEL_DIR, "/models/m");
        conf.set(DisaggregationOptions.NETWORK_HANDOFF, true);
        conf.set(DisaggregationOptions.SAME_DEVICE_HANDOFF, true);
        assertThatThrownBy(() -> new LlamaEngineFactory(conf)).hasMessageContaining("exclude each other");
    }

    @Test
    void disaggregatedBuildsEachSidesEnginesInItsRole() {
        assertThatThrownBy(() -> valid().disaggregated(true).build())
                .hasMessageContaining("prefillEngineFactory(..) and decodeEngineFactory(..)");
        Configuration conf = new Configuration();
        conf.set(DisaggregationOptions.PREFILL_DEVICE, "cuda:1");
        Configuration prefill = DisaggregatedStages.side(conf, DisaggregationOptions.PREFILL_DEVICE,
                org.mstar.engine.EngineRole.PREFILL);
        assertThat(prefill.get(GenerateOptions.DEVICE)).isEqualTo("cuda:1");
        assertThat(prefill.get(DisaggregationOptions.ENGINE_ROLE)).isEqualTo(org.mstar.engine.EngineRole.PREFILL);
        Configuration decode = DisaggregatedStages.side(conf, DisaggregationOptions.DECODE_DEVICE,
                org.mstar.engine.EngineRole.DECODE);
        assertThat(decode.get(GenerateOptions.DEVICE)).isEqualTo(GenerateOptions.DEVICE.defaultValue());
        assertThatThrownBy(() -> GenerationPipeline.builder().bootstrapServers("localhost:9092").transactionalIdPrefix("tx")
                .disaggregated(true).set(GenerateOptions.MODEL_DIR, "/models/m")
                .set(DisaggregationOptions.HANDOFF_RECORD_SIZE, org.apache.flink.configuration.MemorySize.ZERO).build())
                .hasMessageContaining("handoff-record-size");
    }

    @Test
    void exactlyOnceNeedsCheckpointing() {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        assertThatThrownBy(() -> valid().build().addTo(env))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("enable checkpointing");
    }

    private static GenerationPipeline.Builder valid() {
        return GenerationPipeline.builder().bootstrapServers("localhost:9092").engineFactory(ENGINE)
                .transactionalIdPrefix("tx");
    }
}
