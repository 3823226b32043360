package org.mstar.model.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.mstar.model.ModelFormatException;

/**
 * A model folder's chat template: the Jinja program in {@code chat_template.jinja} or under {@code chat_template} in
 * {@code tokenizer_config.json} that turns a conversation into the prompt text the model was trained on, rendered by
 * Jinjava the way transformers renders it: blocks trimmed ({@code trim_blocks}, {@code lstrip_blocks}), loop controls,
 * {@code namespace}, {@code raise_exception(msg)} (a {@link ChatTemplateException}), {@code strftime_now(fmt)} and
 * {@code tojson} with Python's separators ({@link PythonJsonFilter}). The template sees {@code messages},
 * {@code add_generation_prompt}, {@code tools} when given, and the tokenizer config's {@code bos_token} /
 * {@code eos_token}.
 *
 * <p>The rendered text already holds the template's special tokens (BOS included): tokenize it without adding them
 * again ({@code TextTokenizer.encode(text, false)}). Thread-safe after construction.
 */
public final class ChatTemplate {
    /** The file transformers 4.43+ writes beside tokenizer_config.json. */
    public static final String TEMPLATE_FILE = "chat_template.jinja";
    public static final String TOKENIZER_CONFIG = "tokenizer_config.json";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String template;
    private final String bosToken;
    private final String eosToken;
    private final Jinjava jinjava;

    public ChatTemplate(String template, String bosToken, String eosToken) {
        this.template = template;
        this.bosToken = bosToken == null ? "" : bosToken;
        this.eosToken = eosToken == null ? "" : eosToken;
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .withIterateOverMapKeys(true)
                        .withEvaluateMapKeys(true)
                        .build())
                .build();
        this.jinjava = new Jinjava(config);
        jinjava.getGlobalContext().registerFilter(new PythonJsonFilter());
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class,
                "raiseException", String.class));
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class,
                "strftimeNow", String.class));
    }

    /**
     * The chat template of {@code modelDir}, or empty when it declares none ({@code chat_template.jinja} wins over
     * tokenizer_config.json's entry; of a list of named templates, the one named "default").
     *
     * @throws ModelFormatException when tokenizer_config.json's chat_template is neither a string nor a named list
     */
    public static Optional<ChatTemplate> load(Path modelDir) throws IOException {
        Path configFile = modelDir.resolve(TOKENIZER_CONFIG);
        JsonNode config = Files.exists(configFile) ? JSON.readTree(configFile.toFile()) : JSON.createObjectNode();
        Path templateFile = modelDir.resolve(TEMPLATE_FILE);
        String template = Files.exists(templateFile) ? Files.readString(templateFile) : templateOf(config, configFile);
        if (template == null) {
            return Optional.empty();
        }
        return Optional.of(new ChatTemplate(template, token(config.get("bos_token")), token(config.get("eos_token"))));
    }

    private static String templateOf(JsonNode config, Path file) {
        JsonNode t = config.get("chat_template");
        if (t == null || t.isNull()) {
            return null;
        }
        if (t.isTextual()) {
            return t.textValue();
        }
        if (t.isArray()) {
            for (JsonNode named : t) {
                if ("default".equals(named.path("name").asText())) {
                    return named.path("template").asText();
                }
            }
        }
        throw new ModelFormatException(file + ": chat_template must be a string or a list with one named \"default\"");
    }

    /** A special token written as a string or as an AddedToken object ({"content": ...}). */
    private static String token(JsonNode t) {
        if (t == null || t.isNull()) {
            return null;
        }
        return t.isTextual() ? t.textValue() : t.path("content").asText(null);
    }

    /** Called by templates as {@code raise_exception(message)}. */
    public static String raiseException(String message) {
        throw new ChatTemplateException(message);
    }

    /** Called by templates as {@code strftime_now(format)}: the local time in Python's strftime format. */
    public static String strftimeNow(String format) {
        return StrftimeFormat.format(LocalDateTime.now(), format);
    }

    /** The prompt text for {@code messages}, ending with the assistant's opening when {@code addGenerationPrompt}. */
    public String render(List<ChatMessage> messages, boolean addGenerationPrompt) {
        return render(messages, addGenerationPrompt, null);
    }

    /**
     * As {@link #render(List, boolean)}, with {@code tools} (JSON-like maps and lists, as transformers passes tool
     * schemas) visible to the template, or null for none.
     *
     * @throws ChatTemplateException with the template's own message when it refuses the conversation, or the
     *     renderer's when the template cannot be rendered
     */
    public String render(List<ChatMessage> messages, boolean addGenerationPrompt, List<Map<String, Object>> tools) {
        List<Map<String, Object>> msgs = new ArrayList<>();
        for (ChatMessage m : messages) {
            Map<String, Object> map = new LinkedHashMap<>();
            map.put("role", m.role());
            map.put("content", m.content());
            msgs.add(map);
        }
        return renderMaps(msgs, addGenerationPrompt, tools);
    }

    /** Messages as maps: for contents a {@link ChatMessage} cannot hold (a list of typed parts). */
    public String renderMaps(List<Map<String, Object>> messages, boolean addGenerationPrompt,
                             List<Map<String, Object>> tools) {
        Map<String, Object> context = new HashMap<>();
        context.put("messages", messages);
        context.put("add_generation_prompt", addGenerationPrompt);
        context.put("tools", tools);
        context.put("bos_token", bosToken);
        context.put("eos_token", eosToken);
        RenderResult result;
        try {
            result = jinjava.renderForResult(template, context);
        } catch (ChatTemplateException e) {
            throw e;
        } catch (RuntimeException e) {
            throw new ChatTemplateException("the chat template cannot be rendered: " + e.getMessage());
        }
        for (TemplateError error : result.getErrors()) {
            if (error.getSeverity() == TemplateError.ErrorType.FATAL) {
                throw new ChatTemplateException(templateMessage(error));
            }
        }
        return result.getOutput();
    }

    /** The message a template passed to raise_exception, or the renderer's description of the failure. */
    private static String templateMessage(TemplateError error) {
        for (Throwable t = error.getException(); t != null; t = t.getCause()) {
            if (t instanceof ChatTemplateException c) {
                return c.getMessage();
            }
        }
        return "the chat template cannot be rendered: " + error.getMessage()
                + (error.getLineno() > 0 ? " (line " + error.getLineno() + ")" : "");
    }
}
