package org.mstar.sql;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.mstar.engine.FinishReason;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationRequest;
import org.mstar.model.chat.ChatMessage;
import org.mstar.resources.RequestValidationException;

/**
 * Turns an {@code ML_PREDICT} input row (the {@code DESCRIPTOR}'s columns, in the model's input order) into an engine
 * request, and a finished request or a failure into the model's output row.
 *
 * <p>A row's sampling seed is derived from the model's {@code seed} and the row's prompt: a row re-run after a
 * failure samples the very tokens it would have, and equal prompts get equal text.
 */
final class RowConverter implements Serializable {
    private static final long serialVersionUID = 1L;

    private final ModelSettings settings;
    private final ModelColumns columns;

    RowConverter(ModelSettings settings, ModelColumns columns) {
        this.settings = settings;
        this.columns = columns;
    }

    /** @throws RequestValidationException naming the column at fault: none or both of prompt and messages set */
    GenerationRequest request(String requestId, RowData input) {
        String prompt = columns.promptIndex() < 0 || input.isNullAt(columns.promptIndex()) ? null
                : input.getString(columns.promptIndex()).toString();
        List<ChatMessage> messages = columns.messagesIndex() < 0 || input.isNullAt(columns.messagesIndex()) ? null
                : messages(input.getArray(columns.messagesIndex()));
        if ((prompt == null) == (messages == null)) {
            throw new RequestValidationException(columns.promptIndex() >= 0 ? ModelColumns.PROMPT : ModelColumns.MESSAGES,
                    columns.promptIndex() >= 0 && columns.messagesIndex() >= 0
                            ? "set exactly one of prompt and messages" : "must not be null");
        }
        if (prompt != null && prompt.isEmpty()) {
            throw new RequestValidationException(ModelColumns.PROMPT, "must not be empty");
        }
        if (prompt != null && settings.chatTemplate) {
            messages = List.of(ChatMessage.user(prompt));
            prompt = null;
        }
        long seed = seedOf(settings.seed, prompt != null ? prompt : render(messages));
        // null: the base model; a name the engine does not serve is a 400 of the row
        String adapter = columns.adapterIndex() < 0 || input.isNullAt(columns.adapterIndex()) ? null
                : input.getString(columns.adapterIndex()).toString();
        return GenerationRequest.builder(requestId).promptText(prompt).messages(messages)
                .sampling(settings.sampling(seed)).maxTokens(settings.maxTokens).ignoreEos(settings.ignoreEos)
                .constraint(settings.constraint()).adapter(adapter).build();
    }

    /** The turns of a messages column; an empty conversation is refused as the request is built. */
    private static List<ChatMessage> messages(ArrayData turns) {
        List<ChatMessage> out = new ArrayList<>();
        for (int i = 0; i < turns.size(); i++) {
            RowData turn = turns.isNullAt(i) ? null : turns.getRow(i, 2);
            if (turn == null || turn.isNullAt(0) || turn.isNullAt(1)) {
                throw new RequestValidationException(ModelColumns.MESSAGES,
                        "turn " + i + " must have a role and a content");
            }
            out.add(new ChatMessage(turn.getString(0).toString(), turn.getString(1).toString()));
        }
        return out;
    }

    /** The conversation as one string for the seed: role and content of each turn, NUL-separated. */
    private static String render(List<ChatMessage> messages) {
        StringBuilder s = new StringBuilder();
        for (ChatMessage m : messages) {
            s.append(m.role()).append('\0').append(m.content()).append('\0');
        }
        return s.toString();
    }

    /** FNV-1a (64 bit) over the model's seed and the prompt's UTF-8 bytes. */
    static long seedOf(long modelSeed, String prompt) {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < Long.BYTES; i++) {
            h = (h ^ ((modelSeed >>> (8 * i)) & 0xff)) * 0x100000001b3L;
        }
        for (byte b : prompt.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return h;
    }

    /** The output row of a finished request. */
    RowData row(FinishedRequest done) {
        return row(done.text(), done.tokenIds(), done.finish().wireName(), done.promptTokens(), null);
    }

    /** The output row of a failed one: null text, finish_reason 'error', the reason in 'error'. */
    RowData errorRow(RowFailure failure) {
        return row(null, new int[0], FinishReason.ERROR.wireName(), null, failure.describe());
    }

    private RowData row(String text, int[] tokens, String finish, Integer promptTokens, String error) {
        GenericRowData row = new GenericRowData(columns.outputs().size());
        for (int i = 0; i < columns.outputs().size(); i++) {
            row.setField(i, switch (columns.outputs().get(i)) {
                case TEXT -> text == null ? null : StringData.fromString(text);
                case TOKENS -> new GenericArrayData(tokens);
                case FINISH_REASON -> StringData.fromString(finish);
                case PROMPT_TOKENS -> promptTokens;
                case COMPLETION_TOKENS -> tokens.length;
                case ERROR -> error == null ? null : StringData.fromString(error);
            });
        }
        return row;
    }
}
