package org.mstar.model.lora;

import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.mstar.model.ModelConfig;
import org.mstar.resources.AdapterTarget;

/**
 * A projection of a Llama-family layer that an adapter may target, under PEFT's module name, and where its output
 * lies in the projection the forward fuses it into: q, k and v are column ranges of the one qkv output, gate and up
 * of the one gate/up output (a Phi-3 checkpoint's {@code qkv_proj} and {@code gate_up_proj} are those outputs
 * whole). An adapter's update of a module is added to exactly those columns, so modules it does not target add
 * nothing.
 */
public enum LoraModule {
    Q_PROJ("self_attn", "q_proj", Fused.QKV),
    K_PROJ("self_attn", "k_proj", Fused.QKV),
    V_PROJ("self_attn", "v_proj", Fused.QKV),
    QKV_PROJ("self_attn", "qkv_proj", Fused.QKV),
    O_PROJ("self_attn", "o_proj", Fused.O),
    GATE_PROJ("mlp", "gate_proj", Fused.GATE_UP),
    UP_PROJ("mlp", "up_proj", Fused.GATE_UP),
    GATE_UP_PROJ("mlp", "gate_up_proj", Fused.GATE_UP),
    DOWN_PROJ("mlp", "down_proj", Fused.DOWN);

    /** The projections of the forward, each one matmul over a weight that may fuse several modules. */
    public enum Fused { QKV, O, GATE_UP, DOWN }

    private final String block;
    private final String peftName;
    private final Fused fused;

    LoraModule(String block, String peftName, Fused fused) {
        this.block = block;
        this.peftName = peftName;
        this.fused = fused;
    }

    /** The module's name in PEFT's {@code target_modules} and tensor names. */
    public String peftName() {
        return peftName;
    }

    /** The module's path inside a layer, as in {@code layers.{i}.self_attn.q_proj}. */
    String path() {
        return block + "." + peftName;
    }

    public Fused fused() {
        return fused;
    }

    /** The module named {@code peftName} among those {@code config}'s checkpoints have, if any. */
    static Optional<LoraModule> of(String peftName, ModelConfig config) {
        return Arrays.stream(values()).filter(m -> m.peftName.equals(peftName) && m.existsIn(config)).findFirst();
    }

    /** The modules of {@code config}'s checkpoints whose outputs {@code fused} computes, in column order. */
    public static List<LoraModule> of(Fused fused, ModelConfig config) {
        return Arrays.stream(values()).filter(m -> m.fused == fused && m.existsIn(config)).toList();
    }

    /**
     * Whether {@code config}'s checkpoint has this module: fused or separate q/k/v and gate/up, not both; a mixture of
     * experts has no MLP module adapters apply to (its experts are stacked, and its dense layers are few).
     */
    boolean existsIn(ModelConfig config) {
        if (block.equals("mlp") && config.moe().isPresent()) {
            return false;
        }
        boolean fusedOnly = this == QKV_PROJ || this == GATE_UP_PROJ;
        boolean separateOnly = this == Q_PROJ || this == K_PROJ || this == V_PROJ || this == GATE_PROJ
                || this == UP_PROJ;
        return config.fusedCheckpointProjections() ? !separateOnly : !fusedOnly;
    }

    /** The module's shape in {@code config}: {@code lora_A [r, in]}, {@code lora_B [out, r]}. */
    public AdapterTarget target(ModelConfig config) {
        int hidden = config.hiddenSize();
        int inter = config.intermediateSize();
        return switch (this) {
            case Q_PROJ -> new AdapterTarget(peftName, hidden, config.qSize());
            case K_PROJ, V_PROJ -> new AdapterTarget(peftName, hidden, config.kvSize());
            case QKV_PROJ -> new AdapterTarget(peftName, hidden, config.qkvRows());
            case O_PROJ -> new AdapterTarget(peftName, config.qSize(), hidden);
            case GATE_PROJ, UP_PROJ -> new AdapterTarget(peftName, hidden, inter);
            case GATE_UP_PROJ -> new AdapterTarget(peftName, hidden, 2 * inter);
            case DOWN_PROJ -> new AdapterTarget(peftName, inter, hidden);
        };
    }

    /** The first column of this module's output within its fused projection's output. */
    public int fusedColumn(ModelConfig config) {
        return switch (this) {
            case K_PROJ -> config.qSize();
            case V_PROJ -> config.qSize() + config.kvSize();
            case UP_PROJ -> config.intermediateSize();
            default -> 0;
        };
    }
}
