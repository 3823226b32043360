package org.mstar.model.tokenizer;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * Text ↔ token ids through a Hugging Face {@code tokenizer.json}, run by DJL's binding of the Rust
 * tokenizers library (native memory: {@link #close()} frees it).
 *
 * <p><b>No truncation, no padding.</b> Both are switched off explicitly; otherwise DJL cuts every input to
 * 512 tokens when no maximum length is set. A prompt longer than the model's context must be rejected by
 * the engine with a clear error, never shortened here.
 *
 * <p><b>Where BOS comes from: the tokenizer.</b> {@link #encode(String)} runs the post-processor that
 * tokenizer.json declares, which is how each model family says whether it wants a begin token (Llama 3 and
 * Mistral prepend one, Qwen2 does not). The engine takes prompt ids as given and never adds BOS itself. Text
 * that already spells out the begin token (a rendered chat template) goes through
 * {@link #encode(String, boolean) encode(text, false)}, or BOS would appear twice.
 *
 * <p>Decoding skips special tokens (BOS, EOS, reserved ids), as serving engines do for their text output.
 * Use from one thread at a time.
 *
 * <p><b>Never from the network.</b> Left to itself, DJL picks a CUDA build of its native library when it sees a
 * GPU and downloads it; a serving machine may have no network, and a failed download fails the task on every
 * restart. This class pins the CPU build bundled in the tokenizers jar ({@value #FLAVOR_PROPERTY} = cpu) and
 * DJL's offline mode before DJL loads, unless the JVM was started with either set.
 */
public final class TextTokenizer implements AutoCloseable {
    /** The file name inside a model folder. */
    public static final String FILE_NAME = "tokenizer.json";
    /** DJL's choice of native build of the tokenizers library (an environment variable of that name wins). */
    static final String FLAVOR_PROPERTY = "RUST_FLAVOR";
    /** DJL's switch that turns a native-library download into an error. */
    static final String OFFLINE_PROPERTY = "ai.djl.offline";

    static {
        pinBundledNativeLibrary();
    }

    private final HuggingFaceTokenizer tokenizer;
    /** The tokenizer.json it was loaded from. */
    private final Path file;

    private TextTokenizer(HuggingFaceTokenizer tokenizer, Path file) {
        this.tokenizer = tokenizer;
        this.file = file;
    }

    private static void pinBundledNativeLibrary() {
        if (System.getProperty(FLAVOR_PROPERTY) == null) {
            System.setProperty(FLAVOR_PROPERTY, "cpu");
        }
        if (System.getProperty(OFFLINE_PROPERTY) == null) {
            System.setProperty(OFFLINE_PROPERTY, "true");
        }
    }

    /** Loads {@code tokenizer.json} from a model folder, or the file itself when {@code path} is a file. */
    public static TextTokenizer load(Path path) throws IOException {
        Path file = Files.isDirectory(path) ? path.resolve(FILE_NAME) : path;
        // "truncation"/"padding" false make DJL disable both in the native tokenizer, whatever the file says
        Map<String, String> options = Map.of("truncation", "false", "padding", "false", "addSpecialTokens", "true");
        return new TextTokenizer(HuggingFaceTokenizer.newInstance(file, options), file);
    }

    /** The ids of {@code text}, with the special tokens (BOS) the tokenizer's post-processor adds; never truncated. */
    public int[] encode(String text) {
        return encode(text, true);
    }

    /**
     * The ids of {@code text}, never truncated.
     *
     * @param addSpecialTokens whether the post-processor adds its special tokens (false for text that already
     *     contains them)
     */
    public int[] encode(String text, boolean addSpecialTokens) {
        long[] ids = tokenizer.encode(text, addSpecialTokens, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) {
            out[i] = Math.toIntExact(ids[i]);
        }
        return out;
    }

    /** The text of {@code ids}, special tokens skipped; bytes that are not valid UTF-8 become U+FFFD. */
    public String decode(int[] ids) {
        return decode(ids, 0, ids.length);
    }

    /** The text of {@code ids[from, to)}, as {@link #decode(int[])}. */
    String decode(int[] ids, int from, int to) {
        long[] window = new long[to - from];
        for (int i = from; i < to; i++) {
            window[i - from] = ids[i];
        }
        return tokenizer.decode(window, true);
    }

    /**
     * The bytes of each of {@code vocabSize} token ids ({@link TokenBytes}): null for special and unused ids.
     *
     * @throws IllegalArgumentException when the tokenizer is not byte-level BPE
     */
    public byte[][] tokenBytes(int vocabSize) throws IOException {
        return TokenBytes.read(file, vocabSize);
    }

    /** A detokenizer for a stream of generated ids with no text before them. */
    public IncrementalDetokenizer detokenizer() {
        return new IncrementalDetokenizer(this, new int[0]);
    }

    /**
     * A detokenizer for ids generated after {@code promptIds}. The prompt's last tokens are decoding context,
     * so the first generated word keeps its leading space with tokenizers that strip one at the start of a
     * decode (SentencePiece-style, as in Mistral).
     */
    public IncrementalDetokenizer detokenizer(int[] promptIds) {
        return new IncrementalDetokenizer(this, promptIds);
    }

    @Override
    public void close() {
        tokenizer.close();
    }
}
