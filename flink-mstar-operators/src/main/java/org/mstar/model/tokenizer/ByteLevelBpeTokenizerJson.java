package org.mstar.model.tokenizer;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.stream.LongStream;
import java.util.stream.Stream;

/**
 * A synthetic byte-level BPE {@code tokenizer.json} (the format of GPT-2, Llama 3 and Qwen2) of exactly the
 * vocabulary size a model declares, for random checkpoints. Every UTF-8 text round-trips: the 256 byte tokens
 * cover any input, and merges learned from a list of common English words keep English prompts short.
 *
 * <p>Layout: the begin / end tokens take the ids the model config gives them ({@value #BOS}, {@value #EOS},
 * further end ids {@code <|end_of_text_k|>}); the other ids, in increasing order, hold the 256 byte tokens,
 * then the merged tokens, then made-up words (" bako", " dimu", ...) up to the vocabulary size. The made-up
 * words are never produced by encoding, but every id a random model samples decodes to visible text. (They are
 * not special tokens: the tokenizers library loads added tokens in superlinear time; 6k of them took over a
 * second, 100k would take minutes.) As in Llama 3, the post-processor puts {@value #BOS} in front of every
 * encoded text when a bos id is given.
 */
public final class ByteLevelBpeTokenizerJson {
    public static final String BOS = "<|begin_of_text|>";
    public static final String EOS = "<|end_of_text|>";

    /** The corpus the merges are learned from, most frequent first (see {@link #learnMerges}). */
    private static final String WORDS = """
            the of and to in is that for it as was with be by on not he this are or his from at which but have an
            they you were her she there one all we their been has when who will more no if out so said what up its
            about into than them can only other new some could time these two may then do first any my now such
            like our over man me even most made after also did many before must through back years where much
            your way well down should because each just those people how too little state good very make world
            still own see men work long get here between both life being under never day same another know while
            last might us great old year off come since against go came right used take three text token model
            stream data code value number request response class public return void string null true false else
            """;

    private static final ObjectMapper JSON = new ObjectMapper();
    /** Learned once: the same for every vocabulary size, which only decides how many are kept. */
    private static final List<String[]> MERGES = learnMerges();

    private ByteLevelBpeTokenizerJson() {}

    /**
     * The tokenizer.json tree.
     *
     * @param vocabSize total ids, at least 256 plus the special tokens
     * @param bosId id of {@value #BOS}, added in front of every encoding; empty for none
     * @param eosIds ids of the end tokens, the first named {@value #EOS}
     * @throws IllegalArgumentException when an id lies outside the vocabulary or the bytes do not fit
     */
    public static ObjectNode create(int vocabSize, OptionalInt bosId, List<Integer> eosIds) {
        Map<Integer, String> specials = new LinkedHashMap<>();
        bosId.ifPresent(id -> specials.put(id, BOS));
        for (int i = 0; i < eosIds.size(); i++) {
            specials.putIfAbsent(eosIds.get(i), i == 0 ? EOS : "<|end_of_text_" + i + "|>");
        }
        for (int id : specials.keySet()) {
            if (id < 0 || id >= vocabSize) {
                throw new IllegalArgumentException("special token id " + id + " is outside the vocabulary [0, "
                        + vocabSize + ")");
            }
        }
        int free = vocabSize - specials.size();
        if (free < 256) {
            throw new IllegalArgumentException("vocab_size " + vocabSize + " leaves " + free
                    + " ids besides the special tokens; a byte-level tokenizer needs 256");
        }
        List<String[]> merges = MERGES.subList(0, Math.min(MERGES.size(), free - 256));

        ObjectNode root = JSON.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        root.putNull("normalizer");
        root.set("pre_tokenizer", byteLevel(false, true));
        if (bosId.isPresent()) {
            root.set("post_processor", prependBos(bosId.getAsInt()));
        } else {
            root.putNull("post_processor");
        }
        root.set("decoder", byteLevel(true, true));

        ObjectNode model = root.putObject("model");
        model.put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false);
        model.put("byte_fallback", false);
        ObjectNode vocab = model.putObject("vocab");
        // Every token, special ones included, is in the model vocab: the library keeps an added token's id only
        // when the model vocab already holds it, and would renumber the rest after the vocab.
        Iterator<String> tokens = ordinaryTokens(merges);
        for (int id = 0; id < vocabSize; id++) {
            String special = specials.get(id);
            if (special == null) {
                vocab.put(tokens.next(), id);
            } else {
                vocab.put(special, id);
                added.addObject().put("id", id).put("content", special).put("single_word", false)
                        .put("lstrip", false).put("rstrip", false).put("normalized", false).put("special", true);
            }
        }
        ArrayNode mergeList = model.putArray("merges");
        merges.forEach(m -> mergeList.add(m[0] + " " + m[1]));
        return root;
    }

    /** Writes {@link #create} to {@code file}. */
    public static void write(Path file, int vocabSize, OptionalInt bosId, List<Integer> eosIds) throws IOException {
        JSON.writeValue(file.toFile(), create(vocabSize, bosId, eosIds));
    }

    /** Byte tokens, then merged tokens, then made-up words without end: the non-special vocabulary in id order. */
    private static Iterator<String> ordinaryTokens(List<String[]> merges) {
        List<String> learned = new ArrayList<>();
        for (int b = 0; b < 256; b++) {
            learned.add(String.valueOf(ByteLevelAlphabet.charOf(b)));
        }
        merges.forEach(m -> learned.add(m[0] + m[1]));
        Set<String> taken = new HashSet<>(learned);
        Stream<String> madeUp = LongStream.iterate(0, n -> n + 1).mapToObj(ByteLevelBpeTokenizerJson::madeUpWord)
                .filter(w -> !taken.contains(w));
        return Stream.concat(learned.stream(), madeUp).iterator();
    }

    /** Made-up word {@code n}: a space and two or more consonant-vowel syllables, shortest first (" baba", ...). */
    private static String madeUpWord(long n) {
        String consonants = "bdfgklmnprstvz";
        String vowels = "aeiou";
        int syllables = consonants.length() * vowels.length();
        int length = 2;
        for (long count = (long) syllables * syllables; n >= count; count *= syllables) {
            n -= count;
            length++;
        }
        char[] word = new char[1 + 2 * length];
        word[0] = ByteLevelAlphabet.charOf(' ');
        for (int i = length - 1; i >= 0; i--) {
            int syllable = (int) (n % syllables);
            n /= syllables;
            word[1 + 2 * i] = consonants.charAt(syllable / vowels.length());
            word[2 + 2 * i] = vowels.charAt(syllable % vowels.length());
        }
        return new String(word);
    }

    private static ObjectNode byteLevel(boolean addPrefixSpace, boolean trimOffsets) {
        ObjectNode n = JSON.createObjectNode();
        n.put("type", "ByteLevel").put("add_prefix_space", addPrefixSpace).put("trim_offsets", trimOffsets)
                .put("use_regex", true);
        return n;
    }

    private static ObjectNode prependBos(int bosId) {
        ObjectNode p = JSON.createObjectNode();
        p.put("type", "TemplateProcessing");
        ArrayNode single = p.putArray("single");
        single.addObject().putObject("SpecialToken").put("id", BOS).put("type_id", 0);
        single.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
        ArrayNode pair = p.putArray("pair");
        pair.addObject().putObject("SpecialToken").put("id", BOS).put("type_id", 0);
        pair.addObject().putObject("Sequence").put("id", "A").put("type_id", 0);
        pair.addObject().putObject("SpecialToken").put("id", BOS).put("type_id", 1);
        pair.addObject().putObject("Sequence").put("id", "B").put("type_id", 1);
        ObjectNode bos = p.putObject("special_tokens").putObject(BOS);
        bos.put("id", BOS);
        bos.putArray("ids").add(bosId);
        bos.putArray("tokens").add(BOS);
        return p;
    }

    /**
     * Byte-pair encoding learned from {@link #WORDS}: each word counts in four spellings (after a space, as is,
     * and both capitalised; the byte-level pre-tokenizer keeps a word's leading space), weighted by its place
     * in the list. Each round merges the most frequent adjacent pair (the earliest seen on ties) until every
     * spelling is one token.
     */
    private static List<String[]> learnMerges() {
        String[] words = WORDS.trim().split("\\s+");
        List<List<String>> sequences = new ArrayList<>();
        List<Integer> weights = new ArrayList<>();
        for (int i = 0; i < words.length; i++) {
            String w = words[i];
            String capital = w.substring(0, 1).toUpperCase(Locale.ROOT) + w.substring(1);
            for (String spelling : List.of(" " + w, w, " " + capital, capital)) {
                sequences.add(new ArrayList<>(List.of(ByteLevelAlphabet.encode(spelling.getBytes(StandardCharsets.UTF_8)))));
                weights.add(words.length - i);
            }
        }
        List<String[]> merges = new ArrayList<>();
        while (true) {
            Map<List<String>, Integer> counts = new LinkedHashMap<>();
            for (int s = 0; s < sequences.size(); s++) {
                List<String> seq = sequences.get(s);
                for (int i = 0; i + 1 < seq.size(); i++) {
                    counts.merge(List.of(seq.get(i), seq.get(i + 1)), weights.get(s), Integer::sum);
                }
            }
            List<String> best = null;
            int bestCount = 0;
            for (Map.Entry<List<String>, Integer> e : counts.entrySet()) {
                if (e.getValue() > bestCount) {
                    best = e.getKey();
                    bestCount = e.getValue();
                }
            }
            if (best == null) {
                return List.copyOf(merges);
            }
            merges.add(new String[] {best.get(0), best.get(1)});
            for (List<String> seq : sequences) {
                for (int i = 0; i + 1 < seq.size(); i++) {
                    if (seq.get(i).equals(best.get(0)) && seq.get(i + 1).equals(best.get(1))) {
                        seq.set(i, best.get(0) + best.get(1));
                        seq.remove(i + 1);
                    }
                }
            }
        }
    }
}
