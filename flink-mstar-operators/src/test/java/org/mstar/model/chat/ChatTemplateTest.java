package org.mstar.model.chat;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Chat templates rendered by Jinjava against transformers' renderings of the same templates and conversations
 * (fixtures/chat.json, written by scripts/fixtures/write_model_fixtures.py): three templates in the styles of the
 * Qwen, Gemma and Phi families, with tool schemas through tojson, namespace and loop controls, raise_exception,
 * trimmed whitespace and typed content parts.
 */
class ChatTemplateTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final TypeReference<List<Map<String, Object>>> MAPS = new TypeReference<>() {};

    private static JsonNode fixtures() throws Exception {
        return JSON.readTree(Path.of(ChatTemplateTest.class.getResource("/org/mstar/model/fixtures/chat.json").toURI())
                .toFile());
    }

    static Stream<Arguments> cases() throws Exception {
        JsonNode f = fixtures();
        List<Arguments> out = new ArrayList<>();
        for (JsonNode c : f.get("cases")) {
            out.add(Arguments.of(c.get("template").asText() + " " + c.get("conversation").asText() + " gen="
                    + c.get("add_generation_prompt").asBoolean() + " tools=" + !c.get("tools").isNull(), c));
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void rendersAsTransformersDoes(String name, JsonNode c) throws Exception {
        JsonNode f = fixtures();
        ChatTemplate template = new ChatTemplate(f.get("templates").get(c.get("template").asText()).asText(), "<bos>",
                "<eos>");
        List<Map<String, Object>> messages = JSON.convertValue(f.get("conversations").get(c.get("conversation").asText()),
                MAPS);
        List<Map<String, Object>> tools = c.get("tools").isNull() ? null : JSON.convertValue(c.get("tools"), MAPS);
        boolean gen = c.get("add_generation_prompt").asBoolean();
        if (c.has("error")) {
            assertThatThrownBy(() -> template.renderMaps(messages, gen, tools)).isInstanceOf(ChatTemplateException.class)
                    .hasMessage(c.get("error").asText());
        } else {
            assertThat(template.renderMaps(messages, gen, tools)).isEqualTo(c.get("rendered").asText());
        }
    }

    @Test
    void loadsTheTemplateAndSpecialTokensOfAModelFolder() throws Exception {
        Path gemma = Path.of(ChatTemplateTest.class.getResource("/org/mstar/model/fixtures/gemma3_text").toURI());
        ChatTemplate t = ChatTemplate.load(gemma).orElseThrow();
        assertThat(t.render(List.of(ChatMessage.user("Hello")), true))
                .isEqualTo("<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
    }

    @Test
    void aTemplateFileWinsAndAFolderWithoutOneHasNone(@TempDir Path dir) throws Exception {
        assertThat(ChatTemplate.load(dir)).isEmpty();
        Files.writeString(dir.resolve(ChatTemplate.TOKENIZER_CONFIG), "{\"chat_template\": \"config\", "
                + "\"bos_token\": {\"content\": \"<s>\"}}");
        assertThat(ChatTemplate.load(dir).orElseThrow().render(List.of(), false)).isEqualTo("config");
        Files.writeString(dir.resolve(ChatTemplate.TEMPLATE_FILE), "{{ bos_token }}file");
        assertThat(ChatTemplate.load(dir).orElseThrow().render(List.of(), false)).isEqualTo("<s>file");
    }

    @Test
    void tojsonIndentsAsPythonDoes() {
        ChatTemplate t = new ChatTemplate("{{ tools[0] | tojson(indent=2) }}", null, null);
        assertThat(t.render(List.of(), false, List.of(Map.of("a", List.of(1, 2.5, true))))).isEqualTo("""
                {
                  "a": [
                    1,
                    2.5,
                    true
                  ]
                }""");
    }

    /** Templates and what Python's Jinja renders for them (the str methods real templates call, e.g. Qwen3's). */
    static Stream<Arguments> pythonisms() {
        return Stream.of(
                Arguments.of("{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.startswith('b') }}",
                        "truetruefalse"),
                Arguments.of("{{ 'a.b.c'.split('.') | length }} {{ ' a  b '.split() | join(',') }} "
                        + "{{ 'a-b-c'.split('-', 1)[1] }}", "3 a,b b-c"),
                Arguments.of("[{{ 'x\\n\\n'.rstrip('\\n') }}][{{ '\\n\\ny'.lstrip() }}][{{ 'xxhixx'.strip('x') }}]",
                        "[x][y][hi]"),
                Arguments.of("{{ 'ThInK'.lower() }}{{ 'up'.upper() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }}",
                        "thinkUP Hello World Hello"),
                Arguments.of("{{ 'q</think>\\nanswer'.split('</think>')[-1].lstrip('\\n') }}", "answer"),
                Arguments.of("{% for m in messages[::-1] %}{{ loop.index0 }}{{ m.role }} {% endfor %}", "0user 1system "));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource({"pythonisms", "whitespace"})
    void rendersAsJinja2(String template, String python) {
        ChatTemplate t = new ChatTemplate(template, null, null);
        assertThat(t.render(List.of(new ChatMessage("system", "s"), ChatMessage.user("u")), false)).isEqualTo(python);
    }

    /** Jinja's whitespace rules on small templates, with what jinja2 (trim_blocks, lstrip_blocks) renders. */
    static Stream<Arguments> whitespace() {
        return Stream.of(
                // lstrip_blocks takes indentation before a block tag, trim_blocks the newline after it
                Arguments.of("{% for m in messages %}\n    {% if true %}\n  <{{ m.role }}>\n    {% endif %}\n{% endfor %}",
                        "  <system>\n  <user>\n"),
                // ... but not before a tag in the middle of a line, nor before a variable tag
                Arguments.of("a  {% if true %}b{% endif %}\n  {{ 'c' }}", "a  b  c"),
                // "-" strips all whitespace on its side, newlines included; the indentation of an indented template
                Arguments.of("{%- for m in messages %}\n        {{- '<|im_start|>' + m.role }}\n    {%- endfor %}\n",
                        "<|im_start|>system<|im_start|>user"),
                // "+" keeps what lstrip_blocks or trim_blocks would take
                Arguments.of("x\n  {%+ if true +%}\ny{% endif %}", "x\n  \ny"),
                // comments follow the block rules and render nothing
                Arguments.of("  {# note #}\nz {#- tight -#}  w", "zw"),
                // a tag's end inside a string does not end the tag
                Arguments.of("{{- ' -%}' }} {{ \"'\" -}} \n .", " -%} '."));
    }

    @Test
    void namespaceTakesKeywordArgumentsWithOperators() {
        ChatTemplate t = new ChatTemplate("{%- set ns = namespace(flag=true, last=messages|length - 1) %}"
                + "{%- for m in messages %}{% if loop.index0 == ns.last %}{% set ns.flag = false %}{% endif %}"
                + "{% endfor %}{{ ns.last }} {{ ns.flag }}", null, null);
        assertThat(t.render(List.of(ChatMessage.user("a"), ChatMessage.user("b")), false)).isEqualTo("1 false");
    }

    @Test
    void notBindsLooserThanATest() {
        ChatTemplate t = new ChatTemplate("{% if not day is defined %}{% set day = 'today' %}{% endif %}{{ day }}",
                null, null);
        assertThat(t.renderMaps(List.of(), false, null, Map.of("day", "05 Dec"))).isEqualTo("05 Dec");
        assertThat(t.renderMaps(List.of(), false, null, Map.of())).isEqualTo("today");
    }

    @Test
    void anUnknownFilterOrTestIsRefusedNamingItsLine() {
        ChatTemplate filter = new ChatTemplate("{{ bos_token }}\n{{ messages[0].content | shout }}", null, null);
        assertThatThrownBy(() -> filter.render(List.of(ChatMessage.user("x")), false))
                .isInstanceOf(ChatTemplateException.class).hasMessageContaining("No filter named 'shout' (line 2)");
        ChatTemplate test = new ChatTemplate("\n\n{% if messages is loud %}{% endif %}", null, null);
        assertThatThrownBy(() -> test.render(List.of(ChatMessage.user("x")), false))
                .isInstanceOf(ChatTemplateException.class).hasMessageContaining("No test named 'loud' (line 3)");
    }

    @Test
    void addingAnUndefinedValueIsRefusedNamingItsLine() {
        ChatTemplate t = new ChatTemplate("{%- for m in messages %}\n{{- m.content[0].text + '\n' }}\n{%- endfor %}",
                null, null);
        assertThatThrownBy(() -> t.render(List.of(ChatMessage.user("plain text")), false))
                .isInstanceOf(ChatTemplateException.class).hasMessageContaining("undefined or none (line 2)");
        // undefined in a test or a comparison is no error, as in jinja2
        ChatTemplate lenient = new ChatTemplate("{{ 'd' if messages[0].nope is defined }}{{ 'x' if messages[0].nope == 'x' }}"
                + "[{{ messages[0].nope }}]", null, null);
        assertThat(lenient.render(List.of(ChatMessage.user("x")), false)).isEqualTo("[]");
    }

    @Test
    void aMessageIsTextNotTemplate() {
        ChatTemplate t = new ChatTemplate("{{ messages[0].content }}", null, null);
        assertThat(t.render(List.of(ChatMessage.user("{{ 7 * 6 }} {% if true %}x{% endif %}")), false))
                .isEqualTo("{{ 7 * 6 }} {% if true %}x{% endif %}");
    }

    @Test
    void itemsAndIterableAsPython() {
        ChatTemplate t = new ChatTemplate("{% for k, v in tools[0]|items if k != 'b' %}{{ k }}={{ v }}"
                + "{{ ';' if not loop.last }}{% endfor %};"
                + "{{ 'y' if 'text' is iterable else 'n' }}{{ 'y' if 3 is iterable else 'n' }}", null, null);
        Map<String, Object> tool = new java.util.LinkedHashMap<>();
        tool.put("a", 1);
        tool.put("b", 2);
        tool.put("c", "x");
        assertThat(t.render(List.of(), false, List.of(tool))).isEqualTo("a=1;c=x;yn");
    }

    @Test
    void aBrokenTemplateIsNamedNotRendered() {
        ChatTemplate t = new ChatTemplate("{% for m in messages %}{{ m.role }", null, null);
        assertThatThrownBy(() -> t.render(List.of(ChatMessage.user("x")), false))
                .isInstanceOf(ChatTemplateException.class).hasMessageContaining("cannot be rendered");
    }
}
