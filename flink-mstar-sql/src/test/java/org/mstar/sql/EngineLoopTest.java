package org.mstar.sql;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.junit.jupiter.api.Test;
import org.mstar.engine.FinishedRequest;

/** The loop that batches concurrent rows into the engine's steps, on the tiny random Llama. */
class EngineLoopTest {

    @Test
    void rowsPendingTogetherShareStepsAndGetTheTextTheyGetAlone() throws Exception {
        Map<String, String> options = TinyModel.options();
        List<String> prompts = TinyModel.prompts(8);
        Map<String, String> alone = TinyModel.reference(options, prompts);

        ModelSettings settings = TinyModel.settings(options);
        RowConverter converter = new RowConverter(settings, new ModelColumns(0, -1, List.of(ModelColumns.Output.TEXT)));
        List<CompletableFuture<FinishedRequest>> done = new ArrayList<>();
        try (EngineLoop loop = new EngineLoop(TinyModel.engine(settings), "test")) {
            for (int i = 0; i < prompts.size(); i++) {
                done.add(loop.submit(converter.request("r" + i, GenericRowData.of(StringData.fromString(prompts.get(i))))));
            }
            int generated = 0;
            for (int i = 0; i < prompts.size(); i++) {
                FinishedRequest f = done.get(i).join();
                assertThat(f.text()).as(prompts.get(i)).isEqualTo(alone.get(prompts.get(i)));
                generated += f.tokenIds().length;
            }
            // one row at a time would take a step per generated token
            assertThat(loop.widestStep()).isGreaterThan(1);
            assertThat(loop.steps()).isLessThan(generated);
        }
    }

    @Test
    void aPromptTheModelCannotTakeFailsItsRowOnlyWith400() throws Exception {
        ModelSettings settings = TinyModel.settings(TinyModel.options("kv.max-seq-len", "16"));
        RowConverter converter = new RowConverter(settings, new ModelColumns(0, -1, List.of(ModelColumns.Output.TEXT)));
        try (EngineLoop loop = new EngineLoop(TinyModel.engine(settings), "test")) {
            CompletableFuture<FinishedRequest> tooLong = loop.submit(converter.request("long",
                    GenericRowData.of(StringData.fromString("many words ".repeat(40)))));
            CompletableFuture<FinishedRequest> fine = loop.submit(converter.request("fine",
                    GenericRowData.of(StringData.fromString("Hi"))));
            assertThat(fine.join().tokenIds()).isNotEmpty();
            assertThat(tooLong).failsWithin(java.time.Duration.ofMinutes(1))
                    .withThrowableOfType(java.util.concurrent.ExecutionException.class)
                    .havingCause().isInstanceOf(RowFailure.class)
                    .satisfies(e -> assertThat(((RowFailure) e).code()).isEqualTo(400));
        }
    }

    @Test
    void aClosedLoopFailsWhatIsSubmittedAfterwards() throws Exception {
        ModelSettings settings = TinyModel.settings(TinyModel.options());
        RowConverter converter = new RowConverter(settings, new ModelColumns(0, -1, List.of(ModelColumns.Output.TEXT)));
        EngineLoop loop = new EngineLoop(TinyModel.engine(settings), "test");
        loop.close();
        CompletableFuture<FinishedRequest> late = loop.submit(converter.request("late",
                GenericRowData.of(StringData.fromString("Hi"))));
        assertThat(late).isCompletedExceptionally();
        org.assertj.core.api.Assertions.assertThatThrownBy(late::join).isInstanceOf(CompletionException.class);
    }
}
