package org.mstar.engine;

import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.chat.ChatTemplateException;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.RequestValidationException;

/**
 * Everything a request is checked against before the engine accepts it (a client's mistake is a
 * {@link RequestValidationException} naming the field, answered with a 400): a prompt that tokenises to
 * something, token and stop ids inside the vocabulary, lengths that fit the context and the KV pool.
 */
final class RequestChecks {
    private final int vocabSize;
    private final int maxSeqLen;
    private final int pageSize;
    private final int usablePages;
    /** The most pages one request holds at once whatever its length (its window when the cache keeps only that). */
    private final int heldPagesBound;
    /** Null when requests must carry token ids. */
    private final TextTokenizer tokenizer;
    /** Null when the model folder has none: requests with messages are refused. */
    private ChatTemplate chatTemplate;

    /** @param heldPagesBound the most pages a request holds at once; {@code Integer.MAX_VALUE} when it keeps all */
    RequestChecks(int vocabSize, int maxSeqLen, int pageSize, int usablePages, int heldPagesBound,
                  TextTokenizer tokenizer) {
        this.vocabSize = vocabSize;
        this.maxSeqLen = maxSeqLen;
        this.pageSize = pageSize;
        this.usablePages = usablePages;
        this.heldPagesBound = heldPagesBound;
        this.tokenizer = tokenizer;
    }

    void useChatTemplate(ChatTemplate template) {
        this.chatTemplate = template;
    }

    /** The prompt's token ids: given, the text tokenised, or the messages rendered by the chat template and tokenised. */
    int[] prompt(GenerationRequest request) {
        if (request.audio() != null) {
            throw new RequestValidationException("audio", "this model takes text, not audio: serve a speech-to-text"
                    + " model (Whisper) for audio requests");
        }
        int[] ids = request.promptTokenIds();
        if (ids == null && request.messages() != null) {
            ids = chatPrompt(request);
        } else if (ids == null) {
            if (request.promptText() == null) {
                throw new RequestValidationException("prompt", "either prompt text or prompt token ids is required");
            }
            if (tokenizer == null) {
                throw new RequestValidationException("prompt", "this model has no tokenizer; send token ids");
            }
            ids = tokenizer.encode(request.promptText());
        }
        if (ids.length == 0) {
            throw new RequestValidationException("prompt", "must not be empty");
        }
        for (int id : ids) {
            checkId("prompt_token_ids", id);
        }
        return ids;
    }

    private int[] chatPrompt(GenerationRequest request) {
        if (request.promptText() != null) {
            throw new RequestValidationException("messages", "set either messages or a prompt, not both");
        }
        if (chatTemplate == null) {
            throw new RequestValidationException("messages", "this model has no chat template (chat_template.jinja or "
                    + "tokenizer_config.json's chat_template); send a prompt");
        }
        if (tokenizer == null) {
            throw new RequestValidationException("messages", "this model has no tokenizer; send token ids");
        }
        String text;
        try {
            text = chatTemplate.render(request.messages(), true);
        } catch (ChatTemplateException e) {
            throw new RequestValidationException("messages", e.getMessage());
        }
        // the template writes the special tokens (BOS included) itself
        return tokenizer.encode(text, false);
    }

    /**
     * Limits and ids of {@code request}, whose prompt is {@code prompt} and which already generated {@code generated},
     * against this model; the request's own limits (max and min tokens) were checked when it was built.
     */
    void check(GenerationRequest request, int[] prompt, int[] generated) {
        for (int id : request.stopTokenIds()) {
            checkId("stop_token_ids", id);
        }
        if (prompt.length >= maxSeqLen) {
            throw new RequestValidationException("prompt", "has " + prompt.length + " tokens; this model serves at most "
                    + (maxSeqLen - 1) + " prompt tokens");
        }
        int worstPages = Math.min(heldPagesBound,
                (Math.min(maxSeqLen, prompt.length + request.maxTokens()) + pageSize - 1) / pageSize);
        if (worstPages > usablePages) {
            throw new RequestValidationException("max_tokens", "prompt + max_tokens needs " + worstPages
                    + " KV pages; this engine has " + usablePages);
        }
        if (generated.length > request.maxTokens()) {
            throw new IllegalArgumentException("resumed request '" + request.requestId() + "' has " + generated.length
                    + " generated tokens, more than max_tokens " + request.maxTokens());
        }
    }

    private void checkId(String field, int id) {
        if (id < 0 || id >= vocabSize) {
            throw new RequestValidationException(field, "token id " + id + " outside the vocabulary of " + vocabSize);
        }
    }
}
