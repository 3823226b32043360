package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.mstar.schemas.ChatTurn;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.Timings;
import org.mstar.schemas.Usage;

class ResponsePrinterTest {
    @Test
    void severalAnswersEachShowTheirPrompt() {
        GenerateRequest france = GenerateRequest.newBuilder().setRequestId("a").setPrompt("The capital of France is")
                .build();
        GenerateRequest chat = GenerateRequest.newBuilder().setRequestId("b")
                .setMessages(List.of(new ChatTurn("user", "Name   a prime\nplease " + "x".repeat(80)))).build();
        StringWriter out = new StringWriter();
        ResponsePrinter printer = new ResponsePrinter(new PrintWriter(out), new PrintWriter(new StringWriter()), false,
                Map.of("a", ResponsePrinter.asked(france), "b", ResponsePrinter.asked(chat)));
        printer.accept(result("b", "7"));
        printer.accept(result("a", " Paris"));
        assertThat(out.toString().lines()).containsExactly(
                // blanks collapsed, cut to 57 characters and "..."
                "[b] \"Name a prime please " + "x".repeat(37) + "...\" -> 7",
                "[a] \"The capital of France is\" ->  Paris");
    }

    private static Response result(String id, String text) {
        return Response.newBuilder().setEvent(GenerateResult.newBuilder().setRequestId(id).setText(text)
                .setTokenIds(List.of(1)).setFinishReason("stop").setUsage(new Usage(1, 1, 0))
                .setTimings(new Timings(0.0, 1.0, 0.0, 1.0)).build()).build();
    }
}
