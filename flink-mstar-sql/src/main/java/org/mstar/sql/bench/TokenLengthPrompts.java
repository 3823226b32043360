package org.mstar.sql.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.regex.Pattern;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Text prompts that a model's tokenizer encodes to exactly a given number of tokens, its special tokens (BOS)
 * included, so that {@code ML_PREDICT}, which takes text, serves prompts as long as the random token ids the other
 * sides get. A prompt is words drawn at random (seeded by the request's index) from the vocabulary's words, tokens
 * that decode to a space and lowercase letters and that encoding gives back alone; a byte-level BPE splits text into
 * such words before merging, so N words are N tokens. Every prompt is checked by encoding it. Random draws keep prompts from sharing KV pages through
 * the prefix cache, as random token ids do.
 */
final class TokenLengthPrompts {
    /** Enough words that random prompts share no KV page; more only slow the search down. */
    private static final int WORDS = 512;
    private static final Pattern WORD = Pattern.compile(" [a-z]{3,}");
    private static final long SEED = 0x5eed;

    private final TextTokenizer tokenizer;
    private final int specialTokens;
    private final List<String> words = new ArrayList<>();

    /**
     * @param vocabSize the model's vocabulary size: the ids searched for words
     * @throws IllegalStateException when the vocabulary has too few words for varied prompts
     */
    TokenLengthPrompts(TextTokenizer tokenizer, int vocabSize) {
        this.tokenizer = tokenizer;
        this.specialTokens = tokenizer.encode("").length;
        for (int id = 0; id < vocabSize && words.size() < WORDS; id++) {
            String text = tokenizer.decode(new int[] {id});
            if (WORD.matcher(text).matches() && Arrays.equals(tokenizer.encode(text, false), new int[] {id})) {
                words.add(text);
            }
        }
        if (words.size() < 16) {
            throw new IllegalStateException("the vocabulary has " + words.size() + " words of one token; prompts of a"
                    + " given length need at least 16");
        }
    }

    /**
     * The prompt of request {@code index}, of {@code tokens} tokens.
     *
     * @throws IllegalArgumentException when {@code tokens} leaves no room for a word after the special tokens
     * @throws IllegalStateException when the text does not encode to {@code tokens} tokens
     */
    String prompt(int index, int tokens) {
        if (tokens <= specialTokens) {
            throw new IllegalArgumentException("a text prompt of " + tokens + " tokens has no room for a word after the"
                    + " tokenizer's " + specialTokens + " special tokens");
        }
        Random rnd = new Random(SEED * 1_000_003 + index);
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < tokens - specialTokens; i++) {
            text.append(words.get(rnd.nextInt(words.size())));
        }
        String prompt = text.toString();
        int encoded = tokenizer.encode(prompt).length;
        if (encoded != tokens) {
            throw new IllegalStateException("prompt " + index + " encodes to " + encoded + " tokens, not " + tokens);
        }
        return prompt;
    }
}
