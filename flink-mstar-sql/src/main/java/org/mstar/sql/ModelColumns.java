package org.mstar.sql;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.catalog.ResolvedCatalogModel;
import org.apache.flink.table.catalog.ResolvedSchema;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.LogicalTypeFamily;
import org.apache.flink.table.types.logical.LogicalTypeRoot;
import org.apache.flink.table.types.logical.RowType;

/**
 * Which columns a model's {@code INPUT} and {@code OUTPUT} declare, by name: the input is a {@code prompt STRING}, a
 * conversation {@code messages ARRAY<ROW<role STRING, content STRING>>}, or both (each row sets one), and optionally
 * the row's LoRA adapter {@code adapter STRING}; the output any of {@link Output}'s columns, in any order. Anything
 * else is refused by name where the query is planned.
 *
 * @param promptIndex position of {@code prompt} among the input columns (= the {@code DESCRIPTOR}'s), or -1
 * @param messagesIndex position of {@code messages}, or -1
 * @param adapterIndex position of {@code adapter}, or -1 (every row the base model)
 * @param outputs the output columns in declared order
 */
record ModelColumns(int promptIndex, int messagesIndex, int adapterIndex, List<Output> outputs)
        implements Serializable {

    /** The output columns a model may declare. */
    enum Output {
        /** STRING: the generated text; null for an error row. */
        TEXT,
        /** ARRAY&lt;INT&gt;: the generated token ids. */
        TOKENS,
        /** STRING: stop, length or error. */
        FINISH_REASON,
        /** INT: tokens of the prompt as the model saw it (after its chat template). */
        PROMPT_TOKENS,
        /** INT: tokens generated. */
        COMPLETION_TOKENS,
        /** STRING: why the row failed (with its HTTP-style code), or null. */
        ERROR;

        String column() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    static final String PROMPT = "prompt";
    static final String MESSAGES = "messages";
    static final String ADAPTER = "adapter";

    /** A prompt or conversation column and the outputs, no adapter column. */
    ModelColumns(int promptIndex, int messagesIndex, List<Output> outputs) {
        this(promptIndex, messagesIndex, -1, outputs);
    }

    /** @throws ValidationException naming the column at fault */
    static ModelColumns of(ResolvedCatalogModel model) {
        int prompt = -1;
        int messages = -1;
        int adapter = -1;
        List<Column> inputs = model.getResolvedInputSchema().getColumns();
        for (int i = 0; i < inputs.size(); i++) {
            Column c = inputs.get(i);
            LogicalType type = c.getDataType().getLogicalType();
            switch (c.getName()) {
                case PROMPT -> {
                    requireType(isString(type), "input", c, "STRING");
                    prompt = i;
                }
                case MESSAGES -> {
                    requireType(isConversation(type), "input", c, "ARRAY<ROW<role STRING, content STRING>>");
                    messages = i;
                }
                case ADAPTER -> {
                    requireType(isString(type), "input", c, "STRING");
                    adapter = i;
                }
                default -> throw new ValidationException("Model input column '" + c.getName() + "' is not known to"
                        + " the mstar provider: declare 'prompt STRING' and/or 'messages ARRAY<ROW<role STRING,"
                        + " content STRING>>', and optionally 'adapter STRING'.");
            }
        }
        if (prompt < 0 && messages < 0) {
            throw new ValidationException("The mstar provider needs an input column 'prompt STRING' or 'messages"
                    + " ARRAY<ROW<role STRING, content STRING>>'.");
        }
        return new ModelColumns(prompt, messages, adapter, outputs(model.getResolvedOutputSchema()));
    }

    private static List<Output> outputs(ResolvedSchema schema) {
        List<Output> outputs = new ArrayList<>();
        for (Column c : schema.getColumns()) {
            Output output = Arrays.stream(Output.values()).filter(o -> o.column().equals(c.getName())).findFirst()
                    .orElseThrow(() -> new ValidationException("Model output column '" + c.getName() + "' is not"
                            + " known to the mstar provider; known: " + Arrays.stream(Output.values())
                            .map(Output::column).collect(Collectors.joining(", ")) + "."));
            LogicalType type = c.getDataType().getLogicalType();
            switch (output) {
                case TEXT, FINISH_REASON, ERROR -> requireType(isString(type), "output", c, "STRING");
                case PROMPT_TOKENS, COMPLETION_TOKENS ->
                        requireType(type.is(LogicalTypeRoot.INTEGER), "output", c, "INT");
                case TOKENS -> requireType(type instanceof ArrayType a
                        && a.getElementType().is(LogicalTypeRoot.INTEGER), "output", c, "ARRAY<INT>");
            }
            outputs.add(output);
        }
        return List.copyOf(outputs);
    }

    private static boolean isString(LogicalType type) {
        return type.is(LogicalTypeFamily.CHARACTER_STRING);
    }

    private static boolean isConversation(LogicalType type) {
        return type instanceof ArrayType a && a.getElementType() instanceof RowType row
                && row.getFieldNames().equals(List.of("role", "content"))
                && row.getChildren().stream().allMatch(ModelColumns::isString);
    }

    private static void requireType(boolean ok, String side, Column c, String expected) {
        if (!ok) {
            throw new ValidationException("Model " + side + " column '" + c.getName() + "' must be " + expected
                    + ", got " + c.getDataType() + ".");
        }
    }
}
