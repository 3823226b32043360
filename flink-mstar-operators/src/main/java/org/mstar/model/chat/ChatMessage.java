package org.mstar.model.chat;

import java.util.Objects;

/**
 * One turn of a conversation as chat templates read it: {@code role} ("system", "user", "assistant", or whatever
 * the model's template accepts) and its text.
 */
public record ChatMessage(String role, String content) {
    public ChatMessage {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(content, "content");
    }

    public static ChatMessage user(String content) {
        return new ChatMessage("user", content);
    }
}
