package org.mstar.model.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;

/**
 * The bytes every token id of a byte-level BPE {@code tokenizer.json} (GPT-2, Llama 3, Qwen2) stands for: each
 * character of a vocabulary entry maps back to one byte through {@link ByteLevelAlphabet}, so a token may hold part
 * of a multi-byte UTF-8 character. Special added tokens (BOS, EOS, chat markers) are not text and get null, as do
 * ids the file does not use; a non-special added token is its content's UTF-8.
 */
public final class TokenBytes {
    private static final ObjectMapper JSON = new ObjectMapper();

    private TokenBytes() {}

    /**
     * @param vocabSize ids of the model (the table's length; ids beyond the file's are null)
     * @throws IllegalArgumentException when the tokenizer is not byte-level BPE (its decoder is not ByteLevel)
     */
    public static byte[][] read(Path tokenizerJson, int vocabSize) throws IOException {
        JsonNode root = JSON.readTree(tokenizerJson.toFile());
        if (!isByteLevel(root.path("decoder"))) {
            throw new IllegalArgumentException("structured output needs a byte-level BPE tokenizer (decoder "
                    + "ByteLevel, as in Llama 3 and Qwen2); this one decodes with " + root.path("decoder").path("type"));
        }
        byte[][] bytes = new byte[vocabSize][];
        int[] byteOf = new int[0x200];
        java.util.Arrays.fill(byteOf, -1);
        for (int b = 0; b < 256; b++) {
            byteOf[ByteLevelAlphabet.charOf(b)] = b;
        }
        for (Iterator<Map.Entry<String, JsonNode>> it = root.path("model").path("vocab").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            int id = e.getValue().asInt();
            if (id >= 0 && id < vocabSize) {
                bytes[id] = decode(e.getKey(), byteOf);
            }
        }
        for (JsonNode added : root.path("added_tokens")) {
            int id = added.path("id").asInt(-1);
            if (id >= 0 && id < vocabSize) {
                bytes[id] = added.path("special").asBoolean(false) ? null
                        : added.path("content").asText().getBytes(StandardCharsets.UTF_8);
            }
        }
        return bytes;
    }

    /** A vocabulary entry's bytes, or null when a character is outside the byte alphabet. */
    private static byte[] decode(String token, int[] byteOf) {
        byte[] out = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            char c = token.charAt(i);
            int b = c < byteOf.length ? byteOf[c] : -1;
            if (b < 0) {
                return null;
            }
            out[i] = (byte) b;
        }
        return out;
    }

    private static boolean isByteLevel(JsonNode decoder) {
        if ("ByteLevel".equals(decoder.path("type").asText())) {
            return true;
        }
        for (JsonNode d : decoder.path("decoders")) {
            if (isByteLevel(d)) {
                return true;
            }
        }
        return false;
    }
}
