package org.mstar.model.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.TruthyTypeConverter;
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
import jinjava.de.odysseus.el.ExpressionFactoryImpl;
import jinjava.de.odysseus.el.tree.TreeStore;
import jinjava.de.odysseus.el.tree.impl.Cache;
import jinjava.javax.el.CompositeELResolver;
import jinjava.javax.el.ExpressionFactory;
import org.mstar.model.ModelFormatException;

/**
 * A model folder's chat template: the Jinja program in {@code chat_template.jinja} or under {@code chat_template} in
 * {@code tokenizer_config.json} that turns a conversation into the prompt text the model was trained on, rendered by
 * Jinjava the way transformers renders it with jinja2: {@code trim_blocks}, {@code lstrip_blocks} and the {@code -}
 * markers applied to the source as Jinja's lexer applies them ({@link JinjaWhitespace}), the expressions Jinjava
 * parses otherwise rewritten ({@link JinjaSyntax}: {@code seq[::-1]}, {@code not x is defined}, keyword arguments
 * such as {@code namespace(last=messages|length - 1)}), loop controls, {@code raise_exception(msg)} (a
 * {@link ChatTemplateException}), {@code strftime_now(fmt)}, {@code tojson} as Python's {@code json.dumps}
 * ({@link PythonJsonFilter}), {@code items}, Python's {@code str} methods ({@link PythonStringMethods}) and
 * {@code is iterable}. As in jinja2, a filter or test the renderer lacks and {@code +} on an undefined or none
 * operand fail the rendering, naming the template line. A message's text is never rendered as a template. The
 * template sees {@code messages}, {@code add_generation_prompt}, {@code tools} (none when not given), the tokenizer
 * config's {@code bos_token} / {@code eos_token}, and the caller's further variables.
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
    /** Why the template cannot be rendered at all (it names a filter or test the renderer lacks), or empty. */
    private final Optional<String> unrenderable;

    public ChatTemplate(String template, String bosToken, String eosToken) {
        String source;
        Optional<String> unreadable = Optional.empty();
        try {
            source = JinjaWhitespace.apply(template);
        } catch (ChatTemplateException e) {
            source = "";
            unreadable = Optional.of(e.getMessage());
        }
        this.template = source;
        this.bosToken = bosToken == null ? "" : bosToken;
        this.eosToken = eosToken == null ? "" : eosToken;
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PythonStringMethods());
        resolver.add(JinjavaConfig.newBuilder().build().getElResolver());
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withElResolver(resolver)
                // a message's text is data: "{{" in it is never rendered again
                .withNestedInterpretationEnabled(false)
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .withIterateOverMapKeys(true)
                        .withEvaluateMapKeys(true)
                        .build())
                .build();
        this.jinjava = new Jinjava(config) {
            private final ExpressionFactory expressions = pythonExpressions();

            @Override
            public ExpressionFactory getExpressionFactory() {
                return expressions;
            }
        };
        jinjava.getGlobalContext().registerFilter(new PythonJsonFilter());
        jinjava.getGlobalContext().registerFilter(new ItemsFilter());
        jinjava.getGlobalContext().registerFilter(new LoopIfFilter());
        jinjava.getGlobalContext().registerExpTest(new PythonIterableTest());
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class,
                "raiseException", String.class));
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class,
                "strftimeNow", String.class));
        this.unrenderable = unreadable.or(() -> UnknownNames.find(this.template, jinjava.getGlobalContext()));
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

    /** Jinjava's expression factory with {@link PythonAddition} for {@code +}. */
    private static ExpressionFactory pythonExpressions() {
        return new ExpressionFactoryImpl(new TreeStore(new PythonAddition.SyntaxBuilder(), new Cache(256)),
                new TruthyTypeConverter());
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
        return renderMaps(messages, addGenerationPrompt, tools, Map.of());
    }

    /**
     * As {@link #renderMaps(List, boolean, List)}, with further template variables, as transformers passes
     * apply_chat_template's extra keyword arguments (Qwen3's {@code enable_thinking}, Llama's {@code date_string}).
     */
    public String renderMaps(List<Map<String, Object>> messages, boolean addGenerationPrompt,
                             List<Map<String, Object>> tools, Map<String, Object> variables) {
        Map<String, Object> context = new HashMap<>(variables);
        context.put("messages", messages);
        context.put("add_generation_prompt", addGenerationPrompt);
        context.put("tools", tools);
        context.put("bos_token", bosToken);
        context.put("eos_token", eosToken);
        unrenderable.ifPresent(message -> {
            throw new ChatTemplateException(message);
        });
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
            if (t instanceof PythonAddition.UndefinedOperand u) {
                return u.getMessage() + " (line " + error.getLineno() + ")";
            }
            if (t instanceof ChatTemplateException c) {
                return c.getMessage();
            }
        }
        return "the chat template cannot be rendered: " + error.getMessage()
                + (error.getLineno() > 0 ? " (line " + error.getLineno() + ")" : "");
    }
}
