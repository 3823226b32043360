package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.Timings;
import org.mstar.schemas.TokenEvent;
import org.mstar.schemas.Usage;

class DeliveryTimelineTest {
    private static final long MS = 1_000_000;

    @Test
    void latenciesAreMeasuredFromTheSendToArrivalAtTheConsumer() {
        DeliveryTimeline timeline = new DeliveryTimeline();
        // "a" arrives as produced; "b" in one burst, as a checkpoint commits it.
        timeline.sent("a", 0);
        timeline.sent("b", 100 * MS);
        timeline.arrived(token("a", 0), 10 * MS);
        timeline.arrived(token("a", 1), 12 * MS);
        timeline.arrived(token("a", 2), 16 * MS);
        timeline.arrived(result("a", 3.5), 17 * MS);
        timeline.arrived(token("b", 0), 1100 * MS);
        timeline.arrived(token("b", 1), 1100 * MS);
        timeline.arrived(result("b", 4.0), 1100 * MS);

        DeliveryTimeline.Summary s = timeline.summary();

        assertThat(s.requests()).isEqualTo(2);
        assertThat(s.tokens()).isEqualTo(5);
        assertThat(s.firstToken().getMinValue()).isCloseTo(10_000, within(10L));
        assertThat(s.firstToken().getMaxValue()).isCloseTo(1_000_000, within(1_000L));
        assertThat(s.interArrival().getTotalCount()).isEqualTo(3);
        assertThat(s.interArrival().getMinValue()).isZero();
        assertThat(s.interArrival().getMaxValue()).isCloseTo(4_000, within(4L));
        assertThat(s.completion().getMaxValue()).isCloseTo(1_000_000, within(1_000L));
        assertThat(s.engineTtft().getMinValue()).isCloseTo(3_500, within(4L));
        assertThat(timeline.errors()).isEmpty();
    }

    @Test
    void theTableShowsPercentilesInMillisecondsAndTheLoad() {
        DeliveryTimeline timeline = new DeliveryTimeline();
        timeline.sent("a", 0);
        // Under 2.048 ms a 3-digit HdrHistogram is exact to the microsecond.
        timeline.arrived(token("a", 0), 1_500_000);
        timeline.arrived(result("a", 0.5), 1_800_000);
        timeline.arrived(new Response(new ErrorEvent("x", 500, "boom")), 300 * MS);
        DeliveryTable table = new DeliveryTable();
        table.add("exactly-once, checkpoint 1 s", timeline.summary(), 1.25);

        List<String> lines = table.toString().lines().toList();

        assertThat(lines).hasSize(3);
        assertThat(lines.get(0)).contains("first token", "token inter-arrival", "completion", "load");
        assertThat(lines.get(2)).startsWith("exactly-once, checkpoint 1 s")
                .contains("1.5 / 1.5", " - ", "1.8 / 1.8", "0.5", "1.25");
        assertThat(timeline.errors()).containsExactly("x: boom");
    }

    private static Response token(String id, int index) {
        return new Response(new TokenEvent(id, index, 7, "x", null));
    }

    private static Response result(String id, double engineTtftMillis) {
        return new Response(new GenerateResult(id, "", List.of(), "length", new Usage(1, 1, 0),
                new Timings(0.0, engineTtftMillis, 0.0, 0.0), Map.of()));
    }
}
