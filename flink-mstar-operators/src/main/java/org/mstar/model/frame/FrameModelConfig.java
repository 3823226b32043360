package org.mstar.model.frame;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.mstar.model.ModelFormatException;
import org.mstar.resources.RingKVConfig;
import org.mstar.resources.RingKVLayerConfig;

/**
 * The geometry of a frame model ({@code frame_config.json}, docs/guides/frames.md): a decoder-only transformer whose
 * unit of generation is a frame of {@code tokensPerFrame} tokens, conditioned on one action id per frame, with
 * one ring geometry per layer.
 */
public record FrameModelConfig(int vocabSize, int hiddenSize, int numHeads, int numKvHeads, int headDim,
                               int intermediateSize, int tokensPerFrame, int numActions, double rmsNormEps,
                               double ropeTheta, List<RingKVLayerConfig> layers) {
    public static final String FILE = "frame_config.json";
    private static final ObjectMapper JSON = new ObjectMapper();

    public FrameModelConfig {
        positive("vocab_size", vocabSize);
        positive("hidden_size", hiddenSize);
        positive("num_heads", numHeads);
        positive("num_kv_heads", numKvHeads);
        positive("head_dim", headDim);
        positive("intermediate_size", intermediateSize);
        positive("num_actions", numActions);
        if (numHeads % numKvHeads != 0) {
            throw new IllegalArgumentException("num_heads " + numHeads + " is not a multiple of num_kv_heads " + numKvHeads);
        }
        if (headDim % 2 != 0) throw new IllegalArgumentException("head_dim must be even (RoPE), got " + headDim);
        if (layers.isEmpty()) throw new IllegalArgumentException("layers must hold at least one ring geometry");
        layers = List.copyOf(layers);
        // the ring's own checks: tokens_per_frame is whole sparse blocks
        new RingKVConfig(layers.size(), numKvHeads, headDim, numHeads, tokensPerFrame, layers, 1);
    }

    public int numLayers() { return layers.size(); }
    public int qSize() { return numHeads * headDim; }
    public int kvSize() { return numKvHeads * headDim; }

    /**
     * How many of a session's last inputs rebuild its rings exactly when replayed into empty ones: a layer's
     * frame sees history at most {@code ring_buckets * pinned_dilation} frames back ({@code H}, the longest over
     * layers), and layer l's keys are exact only once the layer below was exact over that reach, so the keys of
     * the last layer are exact for the frames still visible after {@code num_layers * H} frames, plus the frame
     * itself.
     */
    public int replayDepth() {
        int reach = layers.stream().mapToInt(l -> l.ringBuckets() * l.pinnedDilation()).max().orElseThrow();
        return Math.addExact(Math.multiplyExact(layers.size(), reach), 1);
    }

    /** The ring KV this model declares, holding {@code sessions} resident sessions. */
    public RingKVConfig ringConfig(int sessions) {
        return new RingKVConfig(layers.size(), numKvHeads, headDim, numHeads, tokensPerFrame, layers, sessions);
    }

    public static FrameModelConfig read(Path folder) throws IOException {
        Path file = folder.resolve(FILE);
        if (!Files.exists(file)) throw new ModelFormatException(folder + " has no " + FILE);
        JsonNode root = JSON.readTree(file.toFile());
        try {
            List<RingKVLayerConfig> layers = new ArrayList<>();
            JsonNode ls = required(root, "layers");
            if (!ls.isArray()) throw new ModelFormatException(file + ": layers must be an array");
            for (JsonNode l : ls) {
                layers.add(new RingKVLayerConfig(required(l, "ring_frames").asInt(), required(l, "ring_buckets").asInt(),
                        l.path("pinned_dilation").asInt(1)));
            }
            return new FrameModelConfig(required(root, "vocab_size").asInt(), required(root, "hidden_size").asInt(),
                    required(root, "num_heads").asInt(), required(root, "num_kv_heads").asInt(),
                    required(root, "head_dim").asInt(), required(root, "intermediate_size").asInt(),
                    required(root, "tokens_per_frame").asInt(), required(root, "num_actions").asInt(),
                    root.path("rms_norm_eps").asDouble(1e-5), root.path("rope_theta").asDouble(10000), layers);
        } catch (IllegalArgumentException e) {
            throw new ModelFormatException(file + ": " + e.getMessage());
        }
    }

    public void write(Path folder) throws IOException {
        ObjectNode root = JSON.createObjectNode();
        root.put("vocab_size", vocabSize).put("hidden_size", hiddenSize).put("num_heads", numHeads)
                .put("num_kv_heads", numKvHeads).put("head_dim", headDim).put("intermediate_size", intermediateSize)
                .put("tokens_per_frame", tokensPerFrame).put("num_actions", numActions)
                .put("rms_norm_eps", rmsNormEps).put("rope_theta", ropeTheta);
        ArrayNode ls = root.putArray("layers");
        for (RingKVLayerConfig l : layers) {
            ls.addObject().put("ring_frames", l.ringFrames()).put("ring_buckets", l.ringBuckets())
                    .put("pinned_dilation", l.pinnedDilation());
        }
        Files.createDirectories(folder);
        JSON.writerWithDefaultPrettyPrinter().writeValue(folder.resolve(FILE).toFile(), root);
    }

    private static JsonNode required(JsonNode node, String field) {
        JsonNode v = node.get(field);
        if (v == null || v.isNull()) throw new IllegalArgumentException("missing field " + field);
        return v;
    }

    private static void positive(String field, int v) {
        if (v <= 0) throw new IllegalArgumentException(field + " must be > 0, got " + v);
    }
}
