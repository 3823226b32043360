package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ServingLoadTest {
    @Test
    void poissonArrivalsKeepTheRequestsAndAverageTheRate() {
        ServingLoad load = ServingLoad.fixed(20_000, 10, 5).poisson(50, 1);

        List<ServingLoad.Request> r = load.requests();
        assertThat(r).hasSize(20_000).allSatisfy(q -> assertThat(q.promptLen()).isEqualTo(10));
        assertThat(r.get(0).arrivalSeconds()).isZero();
        for (int i = 1; i < r.size(); i++) {
            assertThat(r.get(i).arrivalSeconds()).isGreaterThanOrEqualTo(r.get(i - 1).arrivalSeconds());
        }
        assertThat(r.get(r.size() - 1).arrivalSeconds() / (r.size() - 1)).isCloseTo(1.0 / 50, within(0.001));
    }

    @Test
    void theChatMixStaysInItsBoundsWithItsDocumentedMeans() {
        ServingLoad mix = ServingLoad.chatMix(20_000, 7);

        assertThat(mix.requests()).allSatisfy(q -> {
            assertThat(q.promptLen()).isBetween(4, 2048);
            assertThat(q.outputLen()).isBetween(4, 1024);
        });
        assertThat(mix.promptTokens() / 20_000.0).isBetween(210.0, 250.0);
        assertThat(mix.outputTokens() / 20_000.0).isBetween(210.0, 250.0);
        assertThat(ServingLoad.chatMix(100, 7)).isEqualTo(ServingLoad.chatMix(100, 7));
    }

    @Test
    void aJsonLinesFileGivesOneRequestPerLineAndNamesABadLine(@TempDir Path dir) throws Exception {
        Path good = Files.writeString(dir.resolve("lengths.jsonl"),
                "{\"prompt_len\": 12, \"output_len\": 3}\n\n{\"prompt_len\": 7, \"output_len\": 9}\n");
        assertThat(ServingLoad.jsonl(good).requests()).containsExactly(new ServingLoad.Request(12, 3, 0),
                new ServingLoad.Request(7, 9, 0));

        Path bad = Files.writeString(dir.resolve("bad.jsonl"), "{\"prompt_len\": 12, \"output_len\": 3}\n"
                + "{\"prompt_len\": 0, \"output_len\": 3}\n");
        assertThatThrownBy(() -> ServingLoad.jsonl(bad)).hasMessage(bad + " line 2: needs positive integers"
                + " prompt_len and output_len");
        Path notJson = Files.writeString(dir.resolve("x.jsonl"), "prompt 12\n");
        assertThatThrownBy(() -> ServingLoad.jsonl(notJson)).hasMessage(notJson + " line 1: not JSON");
    }

    @Test
    void promptsDependOnlyOnTheirIndexAndLength() {
        assertThat(ServingLoad.prompt(3, 50, 1000)).isEqualTo(ServingLoad.prompt(3, 50, 1000))
                .isNotEqualTo(ServingLoad.prompt(4, 50, 1000));
        assertThat(java.util.Arrays.stream(ServingLoad.prompt(3, 5000, 1000)).min().orElseThrow()).isEqualTo(3);
        assertThat(java.util.Arrays.stream(ServingLoad.prompt(3, 5000, 1000)).max().orElseThrow()).isEqualTo(999);
    }
}
