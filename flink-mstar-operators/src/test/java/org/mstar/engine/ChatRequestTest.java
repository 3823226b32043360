package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.chat.ChatMessage;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;

/**
 * Requests that send a conversation: the engine renders it with the model folder's chat template and serves the
 * same tokens as the rendered text sent as ids; a conversation the template refuses is a 400 naming messages.
 */
class ChatRequestTest {
    private static CpuDevice cpu;

    @BeforeAll
    static void start() {
        cpu = new CpuDevice(2);
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }

    private static GenerationRequest chat(String rid, List<ChatMessage> messages) {
        return GenerationRequest.builder(rid).messages(messages).sampling(SamplingReqConfig.greedy()).maxTokens(8)
                .ignoreEos(true).build();
    }

    @Test
    void aConversationIsServedAsItsRenderedPrompt() throws Exception {
        var folder = TransformersFidelityTest.folder("gemma3_text");
        List<ChatMessage> messages = List.of(new ChatMessage("system", "Be brief."), ChatMessage.user("Hello there"));
        String rendered = ChatTemplate.load(folder).orElseThrow().render(messages, true);
        int[] ids;
        try (TextTokenizer tokenizer = TextTokenizer.load(folder)) {
            ids = tokenizer.encode(rendered, false);
        }
        assertThat(rendered).startsWith("<bos><start_of_turn>user\nBe brief.\n\nHello there");
        try (LlamaEngine engine = LlamaEngineLoader.load(folder, cpu, EngineOptions.cpuDefaults(512))) {
            engine.submit(chat("chat", messages));
            engine.submit(GenerationRequest.builder("ids").promptTokenIds(ids).sampling(SamplingReqConfig.greedy())
                    .maxTokens(8).ignoreEos(true).build());
            EngineDriver driver = new EngineDriver();
            driver.drain(engine, 1_000);

            assertThat(driver.finished.get("chat").promptTokens()).isEqualTo(ids.length);
            assertThat(driver.tokens.get("chat")).isEqualTo(driver.tokens.get("ids")).hasSize(8);
        }
    }

    @Test
    void aConversationTheTemplateRefusesNamesMessages() throws Exception {
        try (LlamaEngine engine = LlamaEngineLoader.load(TransformersFidelityTest.folder("gemma3_text"), cpu,
                EngineOptions.cpuDefaults(512))) {
            assertThatThrownBy(() -> engine.submit(chat("bad", List.of(ChatMessage.user("a"), ChatMessage.user("b")))))
                    .isInstanceOf(RequestValidationException.class).hasMessageContaining("messages")
                    .hasMessageContaining("roles must alternate");
            assertThatThrownBy(() -> engine.submit(chat("empty", List.of())))
                    .isInstanceOf(RequestValidationException.class).hasMessageContaining("must not be empty");
        }
    }
}
