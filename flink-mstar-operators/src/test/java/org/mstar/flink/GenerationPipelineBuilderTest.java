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
