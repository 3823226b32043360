package org.mstar.model.lora;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;

/**
 * A PEFT LoRA adapter's {@code adapter_config.json}, as far as serving needs it: the rank, {@code lora_alpha}, the
 * targeted modules and rank-stabilised scaling. What would change the arithmetic in a way this library does not
 * implement is refused by name ({@link #read}); dropout only acts in training and is ignored.
 *
 * @param rank    {@code r}
 * @param alpha   {@code lora_alpha}
 * @param targets the modules of {@code target_modules} ({@code "all-linear"}: every projection of the layers)
 * @param rsLora  {@code use_rslora}: the update is scaled by {@code alpha / sqrt(r)} instead of {@code alpha / r}
 */
public record PeftAdapterConfig(int rank, double alpha, Set<LoraModule> targets, boolean rsLora) {
    public static final String FILE_NAME = "adapter_config.json";
    private static final ObjectMapper JSON = new ObjectMapper();

    public PeftAdapterConfig {
        targets = targets.isEmpty() ? Set.of() : Set.copyOf(EnumSet.copyOf(targets));
    }

    /** The factor of the update {@code x · Aᵀ · Bᵀ}, as PEFT's {@code scaling}. */
    public float scale() {
        return (float) (rsLora ? alpha / Math.sqrt(rank) : alpha / rank);
    }

    /**
     * Reads {@code folder}'s adapter_config.json against {@code model}.
     *
     * @throws ModelFormatException naming the file and the key: not a LoRA adapter, a module the model has not, or a
     *     feature this library does not apply ({@code fan_in_fan_out}, a {@code bias} other than none,
     *     {@code modules_to_save}, {@code layers_to_transform}, {@code rank_pattern}, {@code alpha_pattern}, DoRA,
     *     {@code layer_replication}, {@code exclude_modules}, {@code target_parameters}, a regular expression as
     *     {@code target_modules})
     */
    public static PeftAdapterConfig read(Path folder, ModelConfig model) throws IOException {
        Path file = folder.resolve(FILE_NAME);
        JsonNode json = JSON.readTree(file.toFile());
        if (json == null || !json.isObject()) {
            throw new ModelFormatException(file + ": not a JSON object");
        }
        String peftType = json.path("peft_type").asText("LORA");
        if (!peftType.equals("LORA")) {
            throw new ModelFormatException(file + ": peft_type " + peftType + " is not a LoRA adapter");
        }
        refuseUnless(file, json, "fan_in_fan_out", JsonNode::asBoolean, "weights stored [in, out] (GPT-2's Conv1D)");
        refuseUnless(file, json, "use_dora", JsonNode::asBoolean, "DoRA's magnitude vectors");
        refuseUnless(file, json, "modules_to_save", n -> n.size() > 0, "fully trained modules saved beside the"
                + " adapter");
        refuseUnless(file, json, "layers_to_transform", n -> !n.isNull(), "an adapter on some layers only");
        refuseUnless(file, json, "rank_pattern", n -> n.size() > 0, "a rank per module");
        refuseUnless(file, json, "alpha_pattern", n -> n.size() > 0, "an alpha per module");
        refuseUnless(file, json, "layer_replication", n -> !n.isNull(), "replicated layers");
        refuseUnless(file, json, "exclude_modules", n -> n.size() > 0 || n.isTextual(), "excluded modules");
        refuseUnless(file, json, "target_parameters", n -> n.size() > 0, "adapters on parameters");
        String bias = json.path("bias").asText("none");
        if (!bias.equals("none")) {
            throw new ModelFormatException(file + ": bias '" + bias + "' is not supported: flink-mstar applies"
                    + " adapters without trained biases (bias: none)");
        }
        int rank = json.path("r").asInt(8);
        if (rank < 1) {
            throw new ModelFormatException(file + ": r must be >= 1, got " + json.get("r"));
        }
        double alpha = json.path("lora_alpha").asDouble(8);
        return new PeftAdapterConfig(rank, alpha, targets(file, json.get("target_modules"), model),
                json.path("use_rslora").asBoolean(false));
    }

    private interface Present {
        boolean in(JsonNode value);
    }

    /** Refuses {@code key} when it is set to something {@code present} calls a use of {@code feature}. */
    private static void refuseUnless(Path file, JsonNode json, String key, Present present, String feature) {
        JsonNode value = json.get(key);
        if (value != null && !value.isNull() && present.in(value)) {
            throw new ModelFormatException(file + ": " + key + " " + value + " is not supported (" + feature
                    + "); flink-mstar serves plain LoRA adapters");
        }
    }

    private static Set<LoraModule> targets(Path file, JsonNode node, ModelConfig model) {
        List<LoraModule> ofModel = Arrays.stream(LoraModule.values()).filter(m -> m.existsIn(model)).toList();
        if (node == null || node.isNull()) {
            throw new ModelFormatException(file + ": target_modules is not set; list the modules the adapter"
                    + " targets");
        }
        if (node.isTextual()) {
            if (node.asText().equals("all-linear")) {
                return EnumSet.copyOf(ofModel);
            }
            throw new ModelFormatException(file + ": target_modules '" + node.asText() + "' is a regular expression;"
                    + " list the module names instead (of " + names(ofModel) + ")");
        }
        Set<LoraModule> targets = EnumSet.noneOf(LoraModule.class);
        for (JsonNode name : node) {
            targets.add(LoraModule.of(name.asText(), model).orElseThrow(() -> new ModelFormatException(file
                    + ": target_modules names '" + name.asText() + "', which is not a projection flink-mstar applies"
                    + " adapters to in " + model.architecture().hfName() + " (" + names(ofModel) + ")")));
        }
        if (targets.isEmpty()) {
            throw new ModelFormatException(file + ": target_modules is empty");
        }
        return targets;
    }

    private static String names(List<LoraModule> modules) {
        List<String> names = new ArrayList<>();
        modules.forEach(m -> names.add(m.peftName()));
        return String.join(", ", names);
    }
}
