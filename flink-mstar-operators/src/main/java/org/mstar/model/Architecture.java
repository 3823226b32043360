package org.mstar.model;

import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * The Hugging Face architectures this library runs: all are the Llama decoder (RMSNorm, GQA attention with
 * RoPE, SwiGLU MLP) with small differences that {@link ModelConfig} records (q/k/v bias, sliding window).
 */
public enum Architecture {
    LLAMA("LlamaForCausalLM", "llama"),
    MISTRAL("MistralForCausalLM", "mistral"),
    QWEN2("Qwen2ForCausalLM", "qwen2");

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
