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

    @Test
    void aBrokenTemplateIsNamedNotRendered() {
        ChatTemplate t = new ChatTemplate("{% for m in messages %}{{ m.role }", null, null);
        assertThatThrownBy(() -> t.render(List.of(ChatMessage.user("x")), false))
                .isInstanceOf(ChatTemplateException.class).hasMessageContaining("cannot be rendered");
    }
}
