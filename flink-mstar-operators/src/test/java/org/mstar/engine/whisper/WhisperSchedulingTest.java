package org.mstar.engine.whisper;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.engine.AudioInput;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.TokenOutput;
import org.mstar.engine.WhisperEngine;
import org.mstar.engine.WhisperEngineLoader;

/**
 * What transcriptions gain from running on the engine core, on the CPU with the tiny checkpoint: a higher-priority
 * request takes the only row first, and under KV pressure a request is preempted and recomputed later — each
 * transcript still transformers' tokens.
 */
class WhisperSchedulingTest extends CpuWhisperTest {
    /** KV pages of 16 tokens one window's 1500-frame context takes. */
    private static final int CONTEXT_PAGES = 94;

    private static WhisperEngine engine(int maxBatchRows, int pages) {
        return WhisperEngineLoader.load(fixture.folder, cpu, null,
                new WhisperEngineOptions(maxBatchRows, pages, 16, fixture.maxNewTokens));
    }

    private static GenerationRequest request(String id, WhisperFixture.Case c, int priority) {
        return GenerationRequest.builder(id).priority(priority)
                .audio(new AudioInput(fixture.audio(c), c.language(), c.task(), c.timestamps()))
                .maxTokens(c.output().length).build();
    }

    /** The request ids in the order their first token came out. */
    private static List<String> firstTokenOrder(WhisperEngine engine) {
        List<String> order = new ArrayList<>();
        for (int step = 0; engine.hasWork(); step++) {
            assertThat(step).as("steps to drain").isLessThan(2_000);
            for (TokenOutput t : engine.step().tokens()) {
                if (!order.contains(t.requestId())) {
                    order.add(t.requestId());
                }
            }
        }
        return order;
    }

    /**
     * With one row, the request submitted second but at a higher priority is transcribed first; at equal priority
     * the first submitted is.
     */
    @Test
    void aHigherPriorityTranscriptionTakesTheOnlyRowFirst() {
        WhisperFixture.Case c = fixture.find("transcribe_en");
        try (WhisperEngine engine = engine(1, 2 * 130 + 1)) {
            engine.submit(request("early", c, 0));
            engine.submit(request("urgent", c, 1));
            assertThat(firstTokenOrder(engine)).containsExactly("urgent", "early");
        }
        try (WhisperEngine engine = engine(1, 2 * 130 + 1)) {
            engine.submit(request("early", c, 0));
            engine.submit(request("late", c, 0));
            assertThat(firstTokenOrder(engine)).containsExactly("early", "late");
        }
    }

    /**
     * Two long transcriptions (two windows each) in a pool that holds both contexts and one page of tokens each: when
     * the first needs its second page of tokens, the later one is preempted (freed), waits, and recomputes its
     * window from its context once pages are free; both transcripts are transformers' tokens, exactly as alone.
     */
    @Test
    void underKvPressureATranscriptionIsPreemptedAndResumedWithTheSameTokens() {
        WhisperFixture.Case c = fixture.find("long_en");
        int usable = 2 * (CONTEXT_PAGES + 1);
        try (WhisperEngine engine = engine(2, usable + 1)) {
            engine.submit(request("a", c, 0));
            engine.submit(request("b", c, 0));
            WhisperFidelityTest.Drained out = WhisperFidelityTest.drain(engine);
            assertThat(out.failures()).isEmpty();
            assertThat(engine.stats().preemptions()).as("preemptions").isPositive();
            List<Integer> expected = Arrays.stream(c.output()).boxed().toList();
            assertThat(out.tokens().get("a")).containsExactlyElementsOf(expected);
            assertThat(out.tokens().get("b")).containsExactlyElementsOf(expected);
            assertThat(out.finished().get("b").tokenIds()).containsExactly(c.output());
        }
    }

    /** The control: a pool with room for both windows whole preempts no one. */
    @Test
    void withRoomForBothWindowsNoTranscriptionIsPreempted() {
        WhisperFixture.Case c = fixture.find("long_en");
        try (WhisperEngine engine = engine(2, 2 * (CONTEXT_PAGES + 28) + 1)) {
            engine.submit(request("a", c, 0));
            engine.submit(request("b", c, 0));
            WhisperFidelityTest.Drained out = WhisperFidelityTest.drain(engine);
            assertThat(out.failures()).isEmpty();
            assertThat(engine.stats().preemptions()).isZero();
            assertThat(out.finished().get("b").tokenIds()).containsExactly(c.output());
        }
    }
}
