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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The published chat templates of the model families the README lists (published/templates, sources in
 * published/SOURCES.md), rendered in Java for every conversation of published/cases.json and compared byte for byte
 * with published/references.json, written by scripts/chat-templates/render-references.py with transformers'
 * renderer or jinja2 configured as transformers configures it. A template's own refusal (raise_exception) must give
 * its message; a failure of jinja2 itself must be a ChatTemplateException naming the same template line.
 */
class ChatTemplatePublishedTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final TypeReference<List<Map<String, Object>>> MAPS = new TypeReference<>() {};
    private static final TypeReference<Map<String, Object>> MAP = new TypeReference<>() {};

    private static Path data() throws Exception {
        return Path.of(ChatTemplatePublishedTest.class.getResource("/org/mstar/model/chat/published").toURI());
    }

    static Stream<Arguments> references() throws Exception {
        JsonNode refs = JSON.readTree(data().resolve("references.json").toFile());
        List<Arguments> out = new ArrayList<>();
        for (JsonNode c : refs.get("cases")) {
            out.add(Arguments.of(c.get("template").asText() + " " + c.get("conversation").asText() + " "
                    + c.get("variables") + " gen=" + c.get("add_generation_prompt").asBoolean(), c));
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("references")
    void rendersAsTransformersDoes(String name, JsonNode c) throws Exception {
        Path data = data();
        String templateName = c.get("template").asText();
        JsonNode spec = JSON.readTree(data.resolve("cases.json").toFile()).get(templateName);
        ChatTemplate template = new ChatTemplate(
                Files.readString(data.resolve("templates").resolve(templateName + ".jinja")),
                spec.get("bos_token").textValue(), spec.get("eos_token").textValue());
        JsonNode conversation = JSON.readTree(data.resolve("conversations.json").toFile())
                .get(c.get("conversation").asText());
        List<Map<String, Object>> messages = JSON.convertValue(conversation.get("messages"), MAPS);
        List<Map<String, Object>> tools = conversation.has("tools")
                ? JSON.convertValue(conversation.get("tools"), MAPS) : null;
        Map<String, Object> variables = JSON.convertValue(c.get("variables"), MAP);
        boolean gen = c.get("add_generation_prompt").asBoolean();
        if (!c.has("error")) {
            assertThat(template.renderMaps(messages, gen, tools, variables)).isEqualTo(c.get("rendered").asText());
        } else if (c.get("error").get("type").asText().equals("TemplateError")) {
            assertThatThrownBy(() -> template.renderMaps(messages, gen, tools, variables))
                    .isInstanceOf(ChatTemplateException.class).hasMessage(c.get("error").get("message").asText());
        } else {
            assertThatThrownBy(() -> template.renderMaps(messages, gen, tools, variables))
                    .isInstanceOf(ChatTemplateException.class)
                    .hasMessageContaining("line " + c.get("error").get("line").asInt());
        }
    }
}
