package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.BindException;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.util.FlinkException;
import org.junit.jupiter.api.Test;

/**
 * A chaos run found serve exiting at start, three times in a row, when other serves on the machine bound the REST
 * port it had chosen before Flink did: serve now moves on to the next free port, unless the user chose the port.
 */
class TakenRestPortRetryTest {
    private final Configuration conf = new Configuration();
    private final List<String> portsTried = new ArrayList<>();

    TakenRestPortRetryTest() {
        conf.set(RestOptions.BIND_ADDRESS, "127.0.0.1");
        conf.set(RestOptions.BIND_PORT, ServeJob.freePort("127.0.0.1", ServeJob.REST_PORTS));
    }

    @Test
    void aChosenPortTakenMeanwhileIsReplacedByTheNextFreeOne() throws Exception {
        String started = TakenRestPortRetry.start(conf, true, () -> {
            portsTried.add(conf.get(RestOptions.BIND_PORT));
            if (portsTried.size() < 3) {
                throw restPortTaken(conf.get(RestOptions.BIND_PORT));
            }
            return "started on " + conf.get(RestOptions.BIND_PORT);
        });

        assertThat(portsTried).hasSize(3).doesNotHaveDuplicates();
        assertThat(Integer.parseInt(portsTried.get(1))).isGreaterThan(Integer.parseInt(portsTried.get(0)));
        assertThat(started).isEqualTo("started on " + portsTried.get(2));
    }

    @Test
    void aPortTheUserChoseIsKeptAndOtherFailuresStand() {
        assertThatThrownBy(() -> TakenRestPortRetry.start(conf, false, () -> {
            portsTried.add(conf.get(RestOptions.BIND_PORT));
            throw restPortTaken(conf.get(RestOptions.BIND_PORT));
        })).hasRootCauseInstanceOf(BindException.class);
        assertThatThrownBy(() -> TakenRestPortRetry.start(conf, true, () -> {
            portsTried.add(conf.get(RestOptions.BIND_PORT));
            throw new FlinkException("no slots");
        })).hasMessage("no slots");

        assertThat(portsTried).hasSize(2).containsOnly(conf.get(RestOptions.BIND_PORT));
    }

    @Test
    void afterSoManyTakenPortsTheFailureStands() {
        assertThatThrownBy(() -> TakenRestPortRetry.start(conf, true, () -> {
            portsTried.add(conf.get(RestOptions.BIND_PORT));
            throw restPortTaken(conf.get(RestOptions.BIND_PORT));
        })).hasRootCauseInstanceOf(BindException.class);

        assertThat(portsTried).hasSize(TakenRestPortRetry.ATTEMPTS);
    }

    /** As Flink's MiniCluster fails when its REST endpoint cannot bind. */
    private static FlinkException restPortTaken(String port) {
        return new FlinkException("Could not create the DispatcherResourceManagerComponent.",
                new BindException("Could not start rest endpoint on any port in port range " + port));
    }
}
