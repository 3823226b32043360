package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.mstar.resources.RequestValidationException;

class GenerationRequestTest {
    @Test
    void unsetFieldsTakeTheirDefaults() {
        GenerationRequest r = GenerationRequest.builder("r").promptText("hi").maxTokens(4).build();
        assertThat(r.promptTokenIds()).isNull();
        assertThat(r.sampling()).isNull();
        assertThat(r.minTokens()).isZero();
        assertThat(r.stopTokenIds()).isEmpty();
        assertThat(r.ignoreEos()).isFalse();
        assertThat(r.priority()).isZero();
        assertThat(r.constraint()).isNull();
        assertThat(r.messages()).isNull();
        assertThat(r.audio()).isNull();
    }

    @Test
    void limitsAreCheckedWhenBuilt() {
        GenerationRequest.Builder b = GenerationRequest.builder("r").promptText("hi");
        assertThatThrownBy(b::build).isInstanceOf(RequestValidationException.class)
                .hasMessage("max_tokens: must be >= 1, got 0");
        assertThatThrownBy(() -> b.maxTokens(3).minTokens(4).build()).isInstanceOf(RequestValidationException.class)
                .hasMessage("min_tokens: must be <= max_tokens (3), got 4");
        assertThatThrownBy(() -> b.maxTokens(3).minTokens(-1).build()).isInstanceOf(RequestValidationException.class)
                .hasMessage("min_tokens: must be in [0, max_tokens], got -1");
        assertThatThrownBy(() -> GenerationRequest.builder("c").messages(List.of()).maxTokens(3).build())
                .isInstanceOf(RequestValidationException.class).hasMessage("messages: must not be empty");
    }
}
