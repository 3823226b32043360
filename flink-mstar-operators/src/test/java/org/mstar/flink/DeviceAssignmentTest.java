package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;
import org.junit.jupiter.api.Test;

class DeviceAssignmentTest {
    @Test
    void explicitDevicesPassThrough() {
        assertThat(DeviceAssignment.resolve("cpu", List.of(gpu("0")), 3)).isEqualTo("cpu");
        assertThat(DeviceAssignment.resolve(" CUDA:2 ", List.of(), 0)).isEqualTo("cuda:2");
    }

    @Test
    void autoSpreadsSubtasksOverTheTaskManagersGpus() {
        List<ExternalResourceInfo> gpus = List.of(gpu("3"), gpu("1"));
        assertThat(DeviceAssignment.resolve("auto", gpus, 0)).isEqualTo("cuda:1");
        assertThat(DeviceAssignment.resolve("auto", gpus, 1)).isEqualTo("cuda:3");
        assertThat(DeviceAssignment.resolve("auto", gpus, 2)).isEqualTo("cuda:1");
    }

    @Test
    void aListGivesSubtaskIItsEntryIModuloTheLength() {
        List<ExternalResourceInfo> gpus = List.of(gpu("5"));
        assertThat(DeviceAssignment.resolve("cuda:0, CUDA:1", gpus, 0)).isEqualTo("cuda:0");
        assertThat(DeviceAssignment.resolve("cuda:0, CUDA:1", gpus, 1)).isEqualTo("cuda:1");
        assertThat(DeviceAssignment.resolve("cuda:0,cuda:1", gpus, 2)).isEqualTo("cuda:0");
        assertThat(DeviceAssignment.resolve("cpu,cuda:3", gpus, 3)).isEqualTo("cuda:3");
    }

    @Test
    void autoWithoutGpusIsCpu() {
        assertThat(DeviceAssignment.resolve("auto", List.of(), 0)).isEqualTo("cpu");
    }

    @Test
    void anythingElseIsRejectedNamingTheOption() {
        assertThatThrownBy(() -> DeviceAssignment.validate("gpu0"))
                .hasMessageContaining("mstar.engine.device").hasMessageContaining("cpu, cuda:N, a list");
        assertThatThrownBy(() -> DeviceAssignment.validate("cuda:0,")).hasMessageContaining("mstar.engine.device");
        assertThatThrownBy(() -> DeviceAssignment.validate("auto,cuda:0")).hasMessageContaining("mstar.engine.device");
    }

    private static ExternalResourceInfo gpu(String index) {
        Map<String, String> props = Map.of("index", index);
        return new ExternalResourceInfo() {
            @Override
            public Optional<String> getProperty(String key) {
                return Optional.ofNullable(props.get(key));
            }

            @Override
            public Collection<String> getKeys() {
                return props.keySet();
            }
        };
    }
}
