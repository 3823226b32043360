package org.mstar.model.lora;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.ModelConfig;
import org.mstar.model.io.SafetensorsWriter;
import org.mstar.model.llama.LlamaWeights;
import org.mstar.resources.AdapterWeights;

/**
 * Small random PEFT LoRA adapters written as PEFT saves them ({@code adapter_config.json} and
 * {@code adapter_model.safetensors} under {@code base_model.model.model.layers.{i}...} names), and PEFT's merge of an
 * adapter into a model's weights ({@code W += scaling · B · A}), the reference an engine serving the adapter must
 * equal. Random B (PEFT initialises it to zero, a trained adapter's is not), so every targeted module changes the
 * output.
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

    /**
     * PEFT's merge of {@code adapter} into {@code weights}: every targeted module's weight {@code W [out, in]} becomes
     * {@code W + scale · B · A}, the product summed in double and the sum rounded once to the weights' dtype.
     */
    public static void merge(LlamaWeights weights, AdapterWeights adapter) {
        Device device = weights.device();
        Map<String, Tensor> hf = weights.hfTensors();
        for (String module : adapter.a().keySet()) {
            LoraModule m = LoraModule.of(module, weights.config()).orElseThrow();
            int r = adapter.rank();
            for (int l = 0; l < weights.config().numLayers(); l++) {
                Tensor w = hf.get("model.layers." + l + "." + m.path() + ".weight");
                int out = (int) w.dim(0);
                int in = (int) w.dim(1);
                float[] a = adapter.a().get(module).get(l);
                float[] b = adapter.b().get(module).get(l);
                float[] merged = device.toFloats(w);
                for (int j = 0; j < out; j++) {
                    for (int c = 0; c < in; c++) {
                        double delta = 0;
                        for (int k = 0; k < r; k++) {
                            delta += (double) b[j * r + k] * a[k * in + c];
                        }
                        merged[j * in + c] = (float) (merged[j * in + c] + adapter.scale() * delta);
                    }
                }
                try (Tensor updated = device.fromFloats(merged, w.dtype(), w.shape())) {
                    device.copy(updated, w);
                }
            }
        }
    }
}
