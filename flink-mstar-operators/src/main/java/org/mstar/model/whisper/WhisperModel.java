package org.mstar.model.whisper;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.AttentionConfig;
import org.mstar.resources.AttentionSpec;
import org.mstar.resources.AttentionStep;
import org.mstar.resources.AttnBackend;
import org.mstar.resources.CrossAttentionConfig;
import org.mstar.resources.CrossAttentionSpec;
import org.mstar.resources.KVStep;
import org.mstar.resources.KVSpec;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.PagedKVConfig;
import org.mstar.resources.PositionConfig;
import org.mstar.resources.PositionSpec;
import org.mstar.resources.PositionStep;
import org.mstar.resources.RaggedAttentionConfig;
import org.mstar.resources.RaggedAttentionSpec;
import org.mstar.resources.RaggedAttnBackend;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.SamplerStep;
import org.mstar.resources.Segment;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.attn.AttentionManager;
import org.mstar.resources.attn.CrossAttentionManager;
import org.mstar.resources.attn.RaggedAttentionManager;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.position.RopeManager;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Whisper on the resource layer. One paged KV cache holds two streams per request: "main", the decoder's
 * self-attention K/V (causal, as a Llama decoder's), and "context", the decoder layers' cross-attention K/V of the
 * encoder output, written once by the step that encodes the request's audio and attended by every later step
 * through zero-span segments. The encoder runs once per 30-second window, cacheless: the windows of the requests a
 * step admits are packed as "audio" spans through ragged bidirectional attention.
 *
 * <p>A step may do both: encode newly admitted requests (their context is written before the decoder layers run,
 * so their prompt is decoded in the same step) and decode every other request's next token.
 */
public final class WhisperModel {
    public static final String NODE = "whisper";
    public static final String WALK = "transcribe";
    public static final String KV = "kv";
    public static final String ATTN = "attn";
    public static final String CROSS = "cross";
    public static final String ENCODER_ATTN = "encoder_attn";
    /** The decoder's positions: the ids of its learned position embedding, one per token of the main stream. */
    public static final String POSITION = "position";
    public static final String SAMPLER = "sampler";
    /** The decoder's own tokens in the KV cache. */
    public static final String MAIN = Segment.MAIN;
    /** The encoder output's cross-attention K/V in the KV cache. */
    public static final String CONTEXT = "context";
    /** The encoder's frames in a step (never cached). */
    public static final String AUDIO = "audio";

    private final WhisperConfig config;
    private final WhisperWeights weights;
    private final DType activations;
    private KVManager kv;
    private AttentionManager attention;
    private CrossAttentionManager cross;
    private RaggedAttentionManager encoderAttention;
    private RopeManager positions;
    private SamplerResource sampler;

    /** @param activations dtype of hidden states between ops (F32 on the CPU reference; BF16 on a GPU) */
    public WhisperModel(WhisperWeights weights, DType activations) {
        this.config = weights.config();
        this.weights = weights;
        this.activations = activations;
    }

    public WhisperConfig config() { return config; }
    public WhisperWeights weights() { return weights; }
    public Device device() { return weights.device(); }
    public DType activations() { return activations; }
    public KVManager kv() { return kv; }
    public SamplerResource sampler() { return sampler; }

    /**
     * The resources to build: the KV cache (decoder geometry; a stream is at most a window's encoder frames or the
     * decoder's positions), paged causal self-attention, cross-attention over the context, ragged encoder
     * attention, the decoder's position ids (planned, so a recorded decode graph reads them from a fixed buffer;
     * only the ids are used, the rotation never) and the sampler.
     *
     * @param pages KV pages in the pool
     * @param pageSize tokens per page
     */
    public List<NodeResourceSpec> declareResources(int pages, int pageSize, List<Integer> stopIds) {
        Set<String> nodes = Set.of(NODE);
        int maxStream = Math.max(config.encoderFrames(), config.maxTargetPositions());
        List<NodeResourceSpec> specs = new ArrayList<>();
        specs.add(new KVSpec(KV, nodes, PagedKVConfig.builder(config.decoderLayers(), config.decoderHeads(),
                config.decoderHeadDim(), maxStream).numQoHeads(config.decoderHeads()).maxNumPages(pages)
                .pageSize(pageSize).prefixCache(false).build()));
        specs.add(new AttentionSpec(ATTN, nodes, new AttentionConfig(KV)));
        specs.add(new CrossAttentionSpec(CROSS, nodes, new CrossAttentionConfig(KV, KV, CONTEXT, AttnBackend.AUTO,
                "auto")));
        specs.add(new RaggedAttentionSpec(ENCODER_ATTN, nodes, new RaggedAttentionConfig(config.encoderHeads(),
                config.encoderHeads(), config.encoderHeadDim(), null, 1, config.encoderFrames(),
                RaggedAttnBackend.AUTO)));
        specs.add(new PositionSpec(POSITION, nodes, new PositionConfig(KV)));
        specs.add(new SamplerSpec(SAMPLER, nodes, config.vocabSize(), true, true, 0, stopIds, true));
        return specs;
    }

    /** Take the resources built from {@link #declareResources}. */
    public void bind(Map<String, Resource> built) {
        kv = (KVManager) built.get(KV);
        attention = (AttentionManager) built.get(ATTN);
        cross = (CrossAttentionManager) built.get(CROSS);
        encoderAttention = (RaggedAttentionManager) built.get(ENCODER_ATTN);
        positions = (RopeManager) built.get(POSITION);
        sampler = (SamplerResource) built.get(SAMPLER);
    }

    AttentionManager attention() { return attention; }
    CrossAttentionManager cross() { return cross; }
    RaggedAttentionManager encoderAttention() { return encoderAttention; }
    RopeManager positions() { return positions; }

    /**
     * The step for one batch: one "main" segment per row (the decoder's tokens; padding rows of a recorded decode
     * step included), each with its context. {@code encode} (step order) are the requests whose window is encoded
     * in this step, whose prompt follows in the same step. Only {@code sampledRids} keep a sampled token.
     */
    public SubmoduleStep declareStep(List<Segment> rows, List<String> encode, Set<String> sampledRids) {
        List<Segment> kvSegments = new ArrayList<>();
        for (Segment row : rows) {
            kvSegments.add(new Segment(row.requestId(), MAIN, row.span()));
            kvSegments.add(new Segment(row.requestId(), CONTEXT, encode.contains(row.requestId())
                    ? config.encoderFrames() : 0));
        }
        Map<String, ResourceStep> steps = new LinkedHashMap<>();
        steps.put(KV, KVStep.builder().segments(kvSegments).build());
        steps.put(ATTN, new AttentionStep(kvSegments, true, false));
        steps.put(CROSS, new AttentionStep(kvSegments, false, false));
        if (!encode.isEmpty()) {
            List<Segment> audio = encode.stream().map(rid -> new Segment(rid, AUDIO, config.encoderFrames())).toList();
            steps.put(ENCODER_ATTN, new AttentionStep(audio, false, false));
        }
        steps.put(POSITION, new PositionStep(kvSegments, null, null));
        steps.put(SAMPLER, new SamplerStep(List.of(), false, true, Map.of(), sampledRids));
        return new SubmoduleStep(steps, null);
    }

    /**
     * Run the planned step: the encoder over {@code melWindows} (each {@code [melFrames, mels]}, frames-major, one per
     * request of the step's {@code encode} list, in order), writing their cross-attention K/V; then the decoder over
     * {@code tokens} (I32 {@code [n]}, the step's decoder tokens in row order) at their planned positions; then
     * logits of the last token of the rows {@code outputRows} (indexes into the step's rows).
     *
     * @return F32 logits {@code [outputRows.length, vocab]}; the caller closes them
     */
    public Tensor forward(List<float[]> melWindows, Tensor tokens, int[] outputRows) {
        return new WhisperForwardPass(this).run(melWindows, tokens, outputRows);
    }

    /**
     * Run the planned decode step (one token a row, no window encoded) with the logits of every row into
     * {@code logits} F32 {@code [rows, vocab]}, adding the pass's temporaries to {@code held} rather than freeing
     * them, so that recorded graph work can keep addressing them.
     */
    public void forwardAllRows(Tensor tokens, Tensor logits, List<Tensor> held) {
        new WhisperForwardPass(this).runAllRows(tokens, logits, held);
    }

    /** The encoder alone over one window (no resources): {@code [encoderFrames, d]} F32, for checks. */
    public float[] encode(float[] melWindow) {
        return new WhisperForwardPass(this).encodeAlone(melWindow);
    }
}
