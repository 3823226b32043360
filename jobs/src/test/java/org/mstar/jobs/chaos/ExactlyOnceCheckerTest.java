package org.mstar.jobs.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.Timings;
import org.mstar.schemas.TokenEvent;
import org.mstar.schemas.Usage;

/** The checker names each way a history can break exactly-once, and passes one that does not. */
class ExactlyOnceCheckerTest {
    private static final List<Integer> REFERENCE = List.of(7, 8, 9);

    private final List<CommittedResponses.Seen> seen = new ArrayList<>();
    private long offset;
    /** When the next response is read (epoch millis); requests are sent at 0. */
    private long readAtMillis = 1;

    @Test
    void aCleanHistoryAndAnErrorEventEndingARequestPass() {
        tokens("ok", 0, 1, 2);
        result("ok", REFERENCE);
        read(ErrorEvent.newBuilder().setRequestId("refused").setCode(400).setMessage("max_tokens: too many").build());

        ExactlyOnceChecker checker = check(List.of("ok", "refused"));

        assertThat(checker.violations).isEmpty();
        assertThat(checker.results).isEqualTo(1);
        assertThat(checker.errorsByCode).containsExactly(Map.entry(400, 1));
    }

    @Test
    void eachBreakOfExactlyOnceIsReportedWithTheRequestsHistory() {
        tokens("twice", 0, 1, 2);
        result("twice", REFERENCE);
        result("twice", REFERENCE);
        tokens("repeated", 0, 1, 1, 2);
        result("repeated", REFERENCE);
        tokens("other", 0, 1, 2);
        result("other", List.of(7, 8, 10));
        tokens("unanswered", 0);
        tokens("stranger", 0);
        result("stranger", REFERENCE);

        ExactlyOnceChecker checker = check(List.of("twice", "repeated", "other", "unanswered"));

        assertThat(checker.violations).hasSize(5);
        assertThat(checker.violations).anySatisfy(v -> assertThat(v).startsWith("twice: ended 2 times")
                .contains("request (sent").contains("read "));
        assertThat(checker.violations).anySatisfy(v -> assertThat(v).startsWith("repeated: token 2 read has index 1"));
        assertThat(checker.violations).anySatisfy(v -> assertThat(v)
                .startsWith("other: the result's token ids [7, 8, 10] differ from the reference [7, 8, 9]"));
        assertThat(checker.violations).anySatisfy(v -> assertThat(v).startsWith("unanswered: unanswered"));
        assertThat(checker.violations).anySatisfy(v -> assertThat(v).startsWith("responses to stranger, which was never sent"));
    }

    @Test
    void aRequestEndingLaterThanTheBoundAfterTheLastFaultIsReportedStuck() {
        readAtMillis = 1_140;
        tokens("prompt", 0, 1, 2);
        result("prompt", REFERENCE);
        readAtMillis = 1_200;
        tokens("slow", 0, 1, 2);
        result("slow", REFERENCE);

        ExactlyOnceChecker checker = new ExactlyOnceChecker(new Timeline(), 1_100, Duration.ofMillis(50));
        checker.check(sent(List.of("prompt", "slow")), Map.of(), seen, Map.of("prompt", REFERENCE, "slow", REFERENCE));

        assertThat(checker.violations).singleElement().satisfies(v -> assertThat(v)
                .startsWith("slow: stuck: ended PT0.1S after the last fault was over, more than PT0.05S"));
    }

    private ExactlyOnceChecker check(List<String> sentIds) {
        Map<String, List<Integer>> reference = Map.of("ok", REFERENCE, "twice", REFERENCE, "repeated", REFERENCE,
                "other", REFERENCE, "unanswered", REFERENCE, "refused", REFERENCE);
        ExactlyOnceChecker checker = new ExactlyOnceChecker(new Timeline(), 0, Duration.ofMinutes(1));
        checker.check(sent(sentIds), Map.of(), seen, reference);
        return checker;
    }

    /** The requests with these ids, sent at time 0. */
    private static List<OpenLoopLoad.SentRequest> sent(List<String> sentIds) {
        return sentIds.stream().map(id -> new OpenLoopLoad.SentRequest(
                GenerateRequest.newBuilder().setRequestId(id).setPromptTokenIds(List.of(3, 4)).build(), 0L)).toList();
    }

    /** Token events of {@code id} with these indexes, each carrying the reference token at its index. */
    private void tokens(String id, int... indexes) {
        for (int i : indexes) {
            read(TokenEvent.newBuilder().setRequestId(id).setIndex(i).setTokenId(REFERENCE.get(i)).setTextDelta("")
                    .build());
        }
    }

    private void result(String id, List<Integer> tokenIds) {
        read(GenerateResult.newBuilder().setRequestId(id).setText("").setTokenIds(tokenIds).setFinishReason("length")
                .setUsage(Usage.newBuilder().setPromptTokens(2).setCompletionTokens(tokenIds.size())
                        .setCachedTokens(0).build())
                .setTimings(Timings.newBuilder().setQueueMs(0).setTimeToFirstTokenMs(0).setMeanInterTokenMs(0)
                        .setTotalMs(0).build())
                .build());
    }

    private void read(Object event) {
        seen.add(new CommittedResponses.Seen(Response.newBuilder().setEvent(event).build(), 0, offset++, readAtMillis));
    }
}
