package org.mstar.model.chat;

/**
 * A conversation the model's chat template refuses (its {@code raise_exception}, e.g. roles that do not alternate)
 * or a template that cannot be rendered; the message says which.
 */
public class ChatTemplateException extends RuntimeException {
    public ChatTemplateException(String message) {
        super(message);
    }
}
