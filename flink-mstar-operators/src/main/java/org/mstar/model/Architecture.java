package org.mstar.model;

import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * The Hugging Face architectures this library runs: all are the Llama decoder (RMSNorm, GQA attention with
 * RoPE, gated MLP) with differences that {@link ModelConfig} records or derives from the architecture: q/k/v bias
 * (Qwen2), per-head q/k RMSNorm (Qwen3, Gemma 3), sliding-window layers (Mistral, Qwen2, Phi-3, Gemma 3), fused
 * q/k/v and gate/up tensors in the checkpoint (Phi-3, Phi-4), and Gemma 3's scaled embeddings, extra norms
 * around attention and MLP, GELU-tanh MLP and separate RoPE base for its local layers; the mixture-of-experts
 * MLPs of OLMoE and Qwen3-MoE ({@link MoeConfig}); and DeepSeek-V2's latent attention in place of GQA.
 */
public enum Architecture {
    LLAMA("LlamaForCausalLM", "llama"),
    MISTRAL("MistralForCausalLM", "mistral"),
    QWEN2("Qwen2ForCausalLM", "qwen2"),
    QWEN3("Qwen3ForCausalLM", "qwen3"),
    /** Gemma 3's text-only checkpoints (1B, 270M); the multimodal ones are Gemma3ForConditionalGeneration. */
    GEMMA3("Gemma3ForCausalLM", "gemma3_text"),
    /** Phi-3 and Phi-4 (Phi-3.5-mini and Phi-4-mini use longrope scaling, which is refused by name). */
    PHI3("Phi3ForCausalLM", "phi3"),
    /** OLMoE: every MLP is routed experts; q and k are RMS-normalised over the whole projection, not per head. */
    OLMOE("OlmoeForCausalLM", "olmoe"),
    /** Qwen3-MoE: Qwen3's attention; routed experts except in the layers its config keeps dense. */
    QWEN3_MOE("Qwen3MoeForCausalLM", "qwen3_moe"),
    /**
     * DeepSeek-V2: multi-head latent attention ({@link LatentAttention}); the gated MLP in its first layers, routed and
     * shared experts from {@code first_k_dense_replace} on.
     */
    DEEPSEEK_V2("DeepseekV2ForCausalLM", "deepseek_v2");

    private final String hfName;
    private final String modelType;

    Architecture(String hfName, String modelType) {
        this.hfName = hfName;
        this.modelType = modelType;
    }

    /** The class name config.json lists under {@code architectures}, e.g. "LlamaForCausalLM". */
    public String hfName() {
        return hfName;
    }

    /** The config.json {@code model_type}, e.g. "llama". */
    public String modelType() {
        return modelType;
    }

    /** @throws ModelFormatException naming {@code hfName} and the supported architectures */
    public static Architecture fromHfName(String hfName) {
        for (Architecture a : values()) {
            if (a.hfName.equals(hfName)) {
                return a;
            }
        }
        throw new ModelFormatException("unsupported architecture '" + hfName + "'; supported: "
                + Arrays.stream(values()).map(Architecture::hfName).collect(Collectors.joining(", ")));
    }
}
