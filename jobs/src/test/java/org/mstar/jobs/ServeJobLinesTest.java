package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalResourceOptions;
import org.junit.jupiter.api.Test;
import org.mstar.flink.DisaggregationOptions;
import org.mstar.flink.GenerateOptions;

/** What serve's running line says: the devices chosen, and the REST port chosen before the cluster starts. */
class ServeJobLinesTest {
    @Test
    void theRunningLineNamesTheDeviceChosen() {
        Configuration conf = new Configuration();
        conf.set(GenerateOptions.DEVICE, "auto");
        assertThat(ServeJob.devices(conf, true)).isEqualTo("device cpu (auto: this local cluster lists no 'gpu' resource)");
        assertThat(ServeJob.devices(conf, false)).startsWith("device auto (per subtask, a GPU");
        conf.set(ExternalResourceOptions.EXTERNAL_RESOURCE_LIST, List.of("gpu"));
        assertThat(ServeJob.devices(conf, true)).startsWith("device auto (per subtask, a GPU");
        conf.set(GenerateOptions.DEVICE, "cuda:1");
        assertThat(ServeJob.devices(conf, true)).isEqualTo("device cuda:1");
    }

    @Test
    void aDisaggregatedJobNamesBothSidesDevices() {
        Configuration conf = new Configuration();
        conf.set(DisaggregationOptions.ENABLED, true);
        conf.set(GenerateOptions.DEVICE, "cpu");
        conf.set(DisaggregationOptions.DECODE_DEVICE, "cuda:0");
        assertThat(ServeJob.devices(conf, true)).isEqualTo("prefill device cpu, decode device cuda:0");
    }

    @Test
    void tasksRunOnlyWhenEverySubtaskOfEveryVertexRuns() throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        assertThat(TasksStarted.allRunning(json.readTree("{\"vertices\": [{\"parallelism\": 2, \"status\": \"RUNNING\","
                + " \"tasks\": {\"RUNNING\": 2}}, {\"parallelism\": 1, \"tasks\": {\"RUNNING\": 1}}]}"))).isTrue();
        // the vertex reads RUNNING while one subtask still initialises (loads its model)
        assertThat(TasksStarted.allRunning(json.readTree("{\"vertices\": [{\"parallelism\": 2, \"status\": \"RUNNING\","
                + " \"tasks\": {\"RUNNING\": 1, \"INITIALIZING\": 1}}]}"))).isFalse();
        assertThat(TasksStarted.allRunning(json.readTree("{\"vertices\": []}"))).isFalse();
    }

    @Test
    void enginesStartWhenTheirMetricIsOneInEverySubtask() throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        // a vertex's metrics as REST lists them: operator name, groups, metric
        assertThat(TasksStarted.engineMetrics(json.readTree("[{\"id\": \"mstar_generate.numRecordsIn\"},"
                + " {\"id\": \"mstar_generate.mstar.engineStarted\"}, {\"id\": \"mstar_generate.mstar.requestsRunning\"}]")))
                .containsExactly("mstar_generate.mstar.engineStarted");
        assertThat(TasksStarted.engineMetrics(json.readTree("[{\"id\": \"Source__mstar_requests.numRecordsOut\"}]")))
                .isEmpty();
        assertThat(TasksStarted.allStarted(json.readTree("[{\"id\": \"m\", \"sum\": 2.0}]"), 2)).isTrue();
        // one subtask still builds its engine, or has not reported yet
        assertThat(TasksStarted.allStarted(json.readTree("[{\"id\": \"m\", \"sum\": 1.0}]"), 2)).isFalse();
        assertThat(TasksStarted.allStarted(json.readTree("[]"), 2)).isFalse();
    }

    @Test
    void theRestPortIsAFreeOneChosenBeforeTheClusterStarts() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            int port = taken.getLocalPort();
            String chosen = ServeJob.freePort("127.0.0.1", port + "-" + (port + 20));
            assertThat(Integer.parseInt(chosen)).isGreaterThan(port).isLessThanOrEqualTo(port + 20);
            Configuration conf = new Configuration();
            conf.set(org.apache.flink.configuration.RestOptions.BIND_PORT, Integer.toString(port));
            ServeJob.bindLocally(conf);
            assertThat(conf.get(org.apache.flink.configuration.RestOptions.BIND_PORT)).isEqualTo(Integer.toString(port));
        }
    }
}
