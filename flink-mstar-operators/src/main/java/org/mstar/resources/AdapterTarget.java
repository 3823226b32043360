package org.mstar.resources;

/**
 * One projection an adapter may target, named as PEFT names the module ({@code q_proj}, {@code down_proj}, ...), with
 * its input and output widths: its {@code lora_A} is {@code [rank, inFeatures]} and its {@code lora_B}
 * {@code [outFeatures, rank]}.
 */
public record AdapterTarget(String module, int inFeatures, int outFeatures) {
    public AdapterTarget {
        if (inFeatures < 1 || outFeatures < 1) {
            throw new IllegalArgumentException("adapter target " + module + " needs positive widths, got "
                    + inFeatures + " -> " + outFeatures);
        }
    }
}
