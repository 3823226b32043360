package org.mstar.jobs;

import java.io.PrintWriter;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/**
 * Prints responses as they arrive. With one request in flight its text streams token by token; with several,
 * each text is printed whole when its request finishes, after its id and what it asked ({@code [id] "The capital of
 * France is" -> Paris...}), so that each answer shows its prompt. Usage and errors go to the second stream.
 */
final class ResponsePrinter implements Consumer<Response> {
    private final PrintWriter out;
    private final PrintWriter info;
    private final boolean streaming;
    /** Request id to what it asked, as shown beside its answer. */
    private final Map<String, String> asked;
    private int errors;

    ResponsePrinter(PrintWriter out, PrintWriter info, boolean streaming) {
        this(out, info, streaming, Map.of());
    }

    ResponsePrinter(PrintWriter out, PrintWriter info, boolean streaming, Map<String, String> asked) {
        this.out = out;
        this.info = info;
        this.streaming = streaming;
        this.asked = asked;
    }

    /** What {@code request} asks, in one short line: its prompt, last chat turn or audio. */
    static String asked(GenerateRequest request) {
        String text;
        if (request.getPrompt() != null) {
            text = request.getPrompt();
        } else if (request.getMessages() != null && !request.getMessages().isEmpty()) {
            text = request.getMessages().get(request.getMessages().size() - 1).getContent();
        } else if (request.getAudio() != null) {
            text = request.getAudio().getPath() != null ? "audio " + request.getAudio().getPath() : "audio";
        } else {
            text = "token ids";
        }
        String line = text.replaceAll("\\s+", " ").strip();
        return "\"" + (line.length() > 60 ? line.substring(0, 57) + "..." : line) + "\"";
    }

    @Override
    public void accept(Response response) {
        Object event = response.getEvent();
        if (event instanceof TokenEvent t) {
            if (streaming) {
                out.print(t.getTextDelta());
                out.flush();
            }
        } else if (event instanceof GenerateResult r) {
            String question = asked.get(r.getRequestId());
            out.println(streaming ? "" : "[" + r.getRequestId() + "] " + (question == null ? "" : question + " -> ")
                    + r.getText());
            info.printf(Locale.ROOT, "[%s] finish=%s prompt_tokens=%d completion_tokens=%d ttft=%.1fms itl=%.1fms%n",
                    r.getRequestId(), r.getFinishReason(), r.getUsage().getPromptTokens(),
                    r.getUsage().getCompletionTokens(), r.getTimings().getTimeToFirstTokenMs(),
                    r.getTimings().getMeanInterTokenMs());
            out.flush();
            info.flush();
        } else {
            ErrorEvent e = (ErrorEvent) event;
            errors++;
            info.printf(Locale.ROOT, "[%s] error %d: %s%n", e.getRequestId(), e.getCode(), e.getMessage());
            info.flush();
        }
    }

    /** How many responses were error events. */
    int errors() {
        return errors;
    }
}
