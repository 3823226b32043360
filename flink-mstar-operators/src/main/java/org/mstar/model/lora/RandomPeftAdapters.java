package org.mstar.model.lora;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.io.SafetensorsWriter;

/**
 * Small random PEFT LoRA adapters written as PEFT saves them ({@code adapter_config.json} and
 * {@code adapter_model.safetensors} under {@code base_model.model.model.layers.{i}...} names): for tests, and for
 * {@code serve --random-adapters}, which lets a new user try adapters on a random model. Random B (PEFT initialises
 * it to zero, a trained adapter's is not), so every targeted module changes the output.
 */
public final class RandomPeftAdapters {
    private static final ObjectMapper JSON = new ObjectMapper();

    private RandomPeftAdapters() {}

    /** An adapter to write: its name (its folder), rank, alpha, scaling rule and PEFT target modules. */
    public record Spec(String name, int rank, double alpha, boolean rsLora, List<String> modules) {}

    /** Writes {@code spec} for {@code config} into {@code dir/name} with weights of seed {@code seed}. */
    public static void write(Path dir, ModelConfig config, Spec spec, long seed) throws IOException {
        Path folder = dir.resolve(spec.name());
        Files.createDirectories(folder);
        ObjectNode json = JSON.createObjectNode();
        json.put("peft_type", "LORA");
        json.put("task_type", "CAUSAL_LM");
        json.put("r", spec.rank());
        json.put("lora_alpha", spec.alpha());
        json.put("lora_dropout", 0.05);
        json.put("bias", "none");
        json.put("fan_in_fan_out", false);
        json.put("use_rslora", spec.rsLora());
        json.putNull("modules_to_save");
        json.putNull("layers_to_transform");
        json.putObject("rank_pattern");
        json.putObject("alpha_pattern");
        spec.modules().forEach(json.putArray("target_modules")::add);
        JSON.writerWithDefaultPrettyPrinter().writeValue(folder.resolve(PeftAdapterConfig.FILE_NAME).toFile(), json);

        Random rnd = new Random(seed);
        List<Tensor> tensors = new ArrayList<>();
        try (CpuDevice cpu = new CpuDevice(1)) {
            SafetensorsWriter out = new SafetensorsWriter();
            for (int l = 0; l < config.numLayers(); l++) {
                for (String name : spec.modules()) {
                    LoraModule m = LoraModule.of(name, config).orElseThrow();
                    var t = m.target(config);
                    String prefix = "base_model.model.model.layers." + l + "." + m.path() + ".lora_";
                    out.add(prefix + "A.weight", track(tensors, random(cpu, rnd, 0.2, spec.rank(), t.inFeatures())));
                    out.add(prefix + "B.weight", track(tensors, random(cpu, rnd, 0.2, t.outFeatures(), spec.rank())));
                }
            }
            out.writeFile(folder.resolve(PeftAdapters.WEIGHTS_FILE));
        } finally {
            tensors.forEach(Tensor::close);
        }
    }

    private static Tensor track(List<Tensor> tensors, Tensor t) {
        tensors.add(t);
        return t;
    }

    private static Tensor random(Device device, Random rnd, double scale, int rows, int cols) {
        float[] v = new float[rows * cols];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) (rnd.nextGaussian() * scale);
        }
        return device.fromFloats(v, DType.F32, rows, cols);
    }
}
