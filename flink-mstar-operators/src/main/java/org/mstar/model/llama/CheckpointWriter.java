package org.mstar.model.llama;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Fp8Quantization;
import org.mstar.model.Fp8Quantizer;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.io.SafetensorsWriter;
import org.mstar.model.tokenizer.ByteLevelBpeTokenizerJson;
import org.mstar.model.tokenizer.TextTokenizer;

/**
 * Writes {@link LlamaWeights} as a complete Hugging Face model folder that this library and transformers
 * both load: config.json, generation_config.json, safetensors under the Hugging Face names, and a synthetic
 * byte-level tokenizer.json ({@link ByteLevelBpeTokenizerJson}) whose special tokens sit at the config's
 * bos / eos ids. Used for random models in tests, {@code mstar generate --random} and the demo.
 */
public final class CheckpointWriter {
    private static final ObjectMapper JSON = new ObjectMapper();

    private CheckpointWriter() {}

    /** Writes {@code weights} into {@code folder} (created if needed) as one model.safetensors. */
    public static void write(LlamaWeights weights, Path folder) throws IOException {
        write(weights, folder, Long.MAX_VALUE);
    }

    /**
     * Writes {@code weights} into {@code folder}, in safetensors shards of at most {@code maxShardBytes} plus an
     * index when they do not fit in one. config.json's torch_dtype is the dtype of the written tensors. When the
     * weights' config declares an FP8 quantization, the Linear weights it quantises are written in its layout.
     */
    public static void write(LlamaWeights weights, Path folder, long maxShardBytes) throws IOException {
        ModelConfig config = weights.config().toBuilder().dtype(weights.dtype()).build();
        Fp8Quantization fp8 = config.quantization().orElse(null);
        Files.createDirectories(folder);
        var json = JSON.writerWithDefaultPrettyPrinter();
        json.writeValue(folder.resolve(ModelConfig.FILE_NAME).toFile(), config.toJson());
        json.writeValue(folder.resolve(GenerationConfig.FILE_NAME).toFile(), GenerationConfig.of(config).toJson());
        ByteLevelBpeTokenizerJson.write(folder.resolve(TextTokenizer.FILE_NAME), config.vocabSize(),
                config.bosTokenId(), config.eosTokenIds());
        SafetensorsWriter tensors = new SafetensorsWriter();
        List<Tensor> copies = new ArrayList<>();
        try {
            weights.hfTensors().forEach((name, stored) -> {
                if (fp8 != null && fp8.quantises(name)) {
                    addQuantised(tensors, copies, name, stored, fp8);
                    return;
                }
                Tensor values = weights.checkpointValues(name, stored);
                if (values != stored) {
                    copies.add(values);
                }
                tensors.add(name, values);
            });
            tensors.writeCheckpoint(folder, maxShardBytes);
        } finally {
            copies.forEach(Tensor::close);
        }
    }

    /**
     * Adds the weight {@code stored} as a published FP8 checkpoint holds it: E4M3 codes under {@code name} and
     * their scales beside them ({@link Fp8Quantizer}).
     */
    private static void addQuantised(SafetensorsWriter tensors, List<Tensor> copies, String name, Tensor stored,
                                     Fp8Quantization fp8) {
        Device device = stored.device();
        int rows = Math.toIntExact(stored.dim(0));
        int cols = Math.toIntExact(stored.dim(1));
        Fp8Quantizer.Quantised q = Fp8Quantizer.quantise(device.toFloats(stored), rows, cols, fp8);
        Tensor codes = device.allocate(DType.U8, rows, cols);
        copies.add(codes);
        device.copyFromHost(ByteBuffer.wrap(q.codes()), codes);
        Tensor scales = device.fromFloats(q.scales(), DType.F32, fp8.scaleShape(rows, cols));
        copies.add(scales);
        tensors.addFp8(name, codes).add(fp8.scaleName(name), scales);
    }

    /**
     * Writes a random model ({@link RandomWeights}) of {@code config}'s geometry, built in host memory; an FP8 one
     * when the config declares a quantization.
     */
    public static void writeRandom(ModelConfig config, DType dtype, long seed, Path folder) throws IOException {
        try (CpuDevice cpu = new CpuDevice(1); LlamaWeights weights = RandomWeights.create(config, cpu, dtype, seed)) {
            write(weights, folder);
        }
    }
}
