package org.mstar.resources;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class KVLabelsTest {
    private static final StreamLayout LAYOUT =
            new StreamLayout(List.of(new PrefixSpan(12, 12, "prefill")), List.of(new LoopGrowth("decode", 1)), 0, null, null);

    private static KVReqConfig withLayouts(Map<String, StreamLayout> layouts) {
        return new KVReqConfig(List.of("main"), null, null, null, null, null, null, null, true, layouts,
                Map.of("decode", 256));
    }

    @Test
    void aLayoutForAnUndeclaredLabelIsTheModelsFaultAndNamesTheLabel() {
        assertThatThrownBy(() -> KVLabels.refuseUndeclaredLabels("orpheus", "kv", Set.of("main"),
                Map.of("main", LAYOUT, "cfg_text", LAYOUT)))
                .isInstanceOf(ModelFaultException.class)
                .isNotInstanceOf(RequestValidationException.class)
                .hasMessageContaining("'cfg_text'").hasMessageContaining("'orpheus'").hasMessageContaining("'kv'");
    }

    @Test
    void declaredLabelsPass() {
        assertThatCode(() -> KVLabels.refuseUndeclaredLabels("orpheus", "kv", Set.of("main", "cfg_text"),
                Map.of("main", LAYOUT, "cfg_text", LAYOUT))).doesNotThrowAnyException();
    }

    @Test
    void everyKVConfigOfARequestIsCheckedAgainstItsOwnResource() {
        Map<String, ResourceReqConfig> configs = Map.of(
                "kv", withLayouts(Map.of("main", LAYOUT)),
                "enc_kv", withLayouts(Map.of("context", LAYOUT)),
                "sampler", SamplingReqConfig.DEFAULTS);

        assertThatCode(() -> KVLabels.refuseUndeclaredLabels("whisper",
                Map.of("kv", Set.of("main"), "enc_kv", Set.of("context")), configs)).doesNotThrowAnyException();
        assertThatThrownBy(() -> KVLabels.refuseUndeclaredLabels("whisper", Map.of("kv", Set.of("main")), configs))
                .isInstanceOf(ModelFaultException.class)
                .hasMessageContaining("'context'").hasMessageContaining("'enc_kv'");
    }

    @Test
    void withoutLayoutsStripsLayoutsAndCapsFromKVConfigsOnly() {
        KVReqConfig kv = withLayouts(Map.of("main", LAYOUT));
        SamplingReqConfig sampling = SamplingReqConfig.greedy();

        Map<String, ResourceReqConfig> trimmed = KVLabels.withoutLayouts(Map.of("kv", kv, "sampler", sampling));

        KVReqConfig trimmedKv = (KVReqConfig) trimmed.get("kv");
        assertThat(trimmedKv.kvLayout()).isNull();
        assertThat(trimmedKv.loopCaps()).isNull();
        assertThat(trimmedKv.neededLabels()).isEqualTo(kv.neededLabels());
        assertThat(trimmed.get("sampler")).isSameAs(sampling);
        assertThat(kv.kvLayout()).isNotNull();
    }
}
