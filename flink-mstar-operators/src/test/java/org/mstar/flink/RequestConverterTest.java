package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.mstar.engine.GenerationRequest;
import org.mstar.model.chat.ChatMessage;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.schemas.ChatTurn;
import org.mstar.schemas.GenerateRequest;

class RequestConverterTest {
    private final RequestConverter converter = new RequestConverter(100, new AudioConverter(java.time.Duration.ofMinutes(10), null));

    @Test
    void unsetFieldsTakeServerDefaults() {
        GenerationRequest r = converter.convert(GenerateRequest.newBuilder().setRequestId("r").setPrompt("hi").build());
        SamplingReqConfig d = SamplingReqConfig.DEFAULTS;
        assertThat(r.maxTokens()).isEqualTo(100);
        assertThat(r.minTokens()).isZero();
        assertThat(r.priority()).isZero();
        assertThat(r.promptText()).isEqualTo("hi");
        assertThat(r.promptTokenIds()).isNull();
        assertThat(r.sampling().temperature()).isEqualTo(d.temperature());
        assertThat(r.sampling().topP()).isEqualTo(d.topP());
        assertThat(r.sampling().seed()).isEqualTo(RequestConverter.seedOf("r"));
        assertThat(r.adapter()).as("the base model").isNull();
    }

    @Test
    void anAdapterGoesToTheEngineByName() {
        GenerationRequest r = converter.convert(GenerateRequest.newBuilder().setRequestId("r").setPrompt("hi")
                .setAdapter("legal-v2").build());
        assertThat(r.adapter()).isEqualTo("legal-v2");
    }

    @Test
    void fieldsAndSamplingOptionsMapToTheEngineRequest() {
        GenerationRequest r = converter.convert(GenerateRequest.newBuilder()
                .setRequestId("r").setPromptTokenIds(List.of(5, 6)).setMaxTokens(9).setMinTokens(2)
                .setTemperature(0.0).setTopK(4).setTopP(0.9).setMinP(0.1).setRepetitionPenalty(1.2).setSeed(7L)
                .setStopTokenIds(List.of(3)).setIgnoreEos(true).setPriority(5)
                .setSamplingOptions(Map.of("repetition_window", "16", "penalize_prompt", "false"))
                .build());
        assertThat(r.promptTokenIds()).containsExactly(5, 6);
        assertThat(r.maxTokens()).isEqualTo(9);
        assertThat(r.minTokens()).isEqualTo(2);
        assertThat(r.stopTokenIds()).containsExactly(3);
        assertThat(r.ignoreEos()).isTrue();
        assertThat(r.priority()).isEqualTo(5);
        assertThat(r.sampling()).isEqualTo(new SamplingReqConfig(0.0, 4, 0.9, true, 1.2, 0.1, 16, 2, false, 1, false, 7L));
    }

    @Test
    void aConversationGoesToTheEngineAsMessages() {
        GenerationRequest r = converter.convert(GenerateRequest.newBuilder().setRequestId("r")
                .setMessages(List.of(new ChatTurn("system", "Be brief."), new ChatTurn("user", "Hi"))).build());
        assertThat(r.promptText()).isNull();
        assertThat(r.promptTokenIds()).isNull();
        assertThat(r.messages()).containsExactly(new ChatMessage("system", "Be brief."), new ChatMessage("user", "Hi"));
        assertRejected(b -> b.setMessages(List.of(new ChatTurn("user", "x"))), "prompt: set exactly one");
        assertRejected(b -> b.setPrompt(null).setMessages(List.of()), "messages: must not be empty");
    }

    @Test
    void seedDerivedFromIdIsStableAndDiffersBetweenIds() {
        assertThat(RequestConverter.seedOf("abc")).isEqualTo(RequestConverter.seedOf("abc"))
                .isNotEqualTo(RequestConverter.seedOf("abd"));
    }

    @Test
    void rejectsWhatCanNeverBeServedNamingTheField() {
        assertRejected(b -> b.setRequestId(" "), "request_id:");
        assertRejected(b -> b.setPrompt(null), "prompt: set exactly one");
        assertRejected(b -> b.setPromptTokenIds(List.of(1)), "prompt: set exactly one");
        assertRejected(b -> b.setPrompt(""), "prompt: must not be empty");
        assertRejected(b -> b.setPrompt(null).setPromptTokenIds(List.of()), "prompt_token_ids: must not be empty");
        assertRejected(b -> b.setPrompt(null).setPromptTokenIds(List.of(1, -4)), "prompt_token_ids:");
        assertRejected(b -> b.setMaxTokens(0), "max_tokens:");
        assertRejected(b -> b.setMaxTokens(3).setMinTokens(4), "min_tokens:");
        assertRejected(b -> b.setStopTokenIds(List.of(-1)), "stop_token_ids:");
        assertRejected(b -> b.setTemperature(Double.NaN), "temperature:");
        assertRejected(b -> b.setTemperature(-0.5), "temperature:");
        assertRejected(b -> b.setTopP(0.0), "top_p:");
        assertRejected(b -> b.setTopK(-1), "top_k:");
        assertRejected(b -> b.setMinP(Double.POSITIVE_INFINITY), "min_p:");
        assertRejected(b -> b.setRepetitionPenalty(0.0), "repetition_penalty:");
        assertRejected(b -> b.setSamplingOptions(Map.of("beam_width", "4")), "sampling_options: unknown option 'beam_width'");
        assertRejected(b -> b.setSamplingOptions(Map.of("top_p_first", "yes")), "sampling_options.top_p_first:");
        assertRejected(b -> b.setSamplingOptions(Map.of("repetition_window", "x")), "sampling_options.repetition_window:");
        assertRejected(b -> b.setAdapter(" "), "adapter: must name an adapter");
    }

    private void assertRejected(Consumer<GenerateRequest.Builder> change, String messageStart) {
        GenerateRequest.Builder b = GenerateRequest.newBuilder().setRequestId("r").setPrompt("hello");
        change.accept(b);
        assertThatThrownBy(() -> converter.convert(b.build()))
                .isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith(messageStart);
    }
}
