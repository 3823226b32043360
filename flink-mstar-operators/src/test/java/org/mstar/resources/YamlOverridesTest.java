package org.mstar.resources;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class YamlOverridesTest {
    private PagedKVConfig kvConfig;
    private PagedKVConfig encoderConfig;
    private AttentionConfig attnConfig;
    private List<NodeResourceSpec> specs;

    @BeforeEach
    void setUp() {
        kvConfig = PagedKVConfig.builder(2, 2, 64, 4096).pageSize(128).build();
        encoderConfig = PagedKVConfig.builder(2, 2, 64, 1500).pageSize(128).build();
        attnConfig = new AttentionConfig("kv");
        specs = List.of(
                new KVSpec("kv", Set.of("decoder"), kvConfig),
                new KVSpec("enc_kv", Set.of("encoder"), encoderConfig),
                new AttentionSpec("attn", Set.of("decoder"), attnConfig),
                new SamplerSpec("sampler", Set.of("decoder"), 32000));
    }

    @Test
    void eachBlockTunesOnlyItsOwnResource() {
        YamlOverrides.apply(specs, """
                model: llama
                resources:
                  kv:
                    page_size: 16
                    max_num_pages: 512
                    prefix_cache: false
                  attn:
                    backend: dense
                """);

        assertThat(kvConfig.pageSize()).isEqualTo(16);
        assertThat(kvConfig.maxNumPages()).isEqualTo(512);
        assertThat(kvConfig.prefixCache()).isFalse();
        assertThat(encoderConfig.pageSize()).isEqualTo(128);
        assertThat(attnConfig.backend()).isEqualTo(AttnBackend.DENSE);
    }

    @Test
    void aTypoInAFieldNamesTheFieldAndTheResource() {
        assertThatThrownBy(() -> YamlOverrides.apply(specs, """
                resources:
                  kv:
                    pagesize: 16
                """))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("resources.kv")
                .hasMessageContaining("'pagesize'");
        assertThat(kvConfig.pageSize()).isEqualTo(128);
    }

    @Test
    void aTypoInAResourceKeyIsNamedAndNothingIsApplied() {
        assertThatThrownBy(() -> YamlOverrides.apply(specs, """
                resources:
                  kv:
                    page_size: 16
                  kv_cahce:
                    page_size: 32
                """))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'kv_cahce'");
        assertThat(kvConfig.pageSize()).isEqualTo(128);
    }

    @Test
    void aValueOfTheWrongTypeIsNamed() {
        assertThatThrownBy(() -> YamlOverrides.apply(specs, "resources: {kv: {page_size: sixteen}}"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("resources.kv").hasMessageContaining("'page_size'");
    }

    @Test
    void aResourceThatAcceptsNoOverridesRefusesAny() {
        assertThatThrownBy(() -> YamlOverrides.apply(specs, "resources: {sampler: {top_k: 5}}"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("resources.sampler").hasMessageContaining("'top_k'");
    }

    @Test
    void noResourcesBlockOrAnEmptyBlockChangesNothing() {
        YamlOverrides.apply(specs, "model: llama\n");
        YamlOverrides.apply(specs, "");
        YamlOverrides.apply(specs, "resources:\n  kv:\n");

        assertThat(kvConfig.pageSize()).isEqualTo(128);
    }

    @Test
    void blocksThatAreNotMappingsAreRefused() {
        assertThatThrownBy(() -> YamlOverrides.apply(specs, "resources: [kv]"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resources");
        assertThatThrownBy(() -> YamlOverrides.apply(specs, "resources: {kv: 16}"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("resources.kv");
        assertThatThrownBy(() -> YamlOverrides.apply(specs, "- just a list"))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("deployment YAML");
    }

    @Test
    void anAlreadyParsedConfigIsAppliedTheSameWay() {
        YamlOverrides.apply(specs, Map.of("resources", Map.of("enc_kv", Map.of("max_seq_len", 3000))));

        assertThat(encoderConfig.maxSeqLen()).isEqualTo(3000);
    }
}
