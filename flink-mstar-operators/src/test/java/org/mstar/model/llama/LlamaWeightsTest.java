package org.mstar.model.llama;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.mstar.device.ComputeOps;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.device.UnsupportedOnDeviceException;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.Architecture;
import org.mstar.model.GenerationConfig;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.io.SafetensorsWriter;
import org.mstar.model.tokenizer.TextTokenizer;

class LlamaWeightsTest {
    /** Small GQA Llama: H 64, I 96, Hq 4, Hkv 2, D 16, two end tokens. */
    private static final ModelConfig LLAMA = ModelConfig.builder(Architecture.LLAMA).hiddenSize(64).intermediateSize(96)
            .numLayers(2).numHeads(4).numKvHeads(2).maxPositionEmbeddings(128).vocabSize(512).ropeTheta(500_000)
            .bosTokenId(500).eosTokenIds(List.of(501, 502)).build();
    private static final ModelConfig QWEN = ModelConfig.builder(Architecture.QWEN2).hiddenSize(48).intermediateSize(80)
            .numLayers(3).numHeads(6).numKvHeads(2).maxPositionEmbeddings(64).vocabSize(400).slidingWindow(32, 2)
            .eosTokenId(399).build();

    private final CpuDevice cpu = new CpuDevice(1);

    @TempDir
    Path dir;

    @AfterEach
    void closeDevice() {
        cpu.close();
    }

    static byte[] raw(Tensor t) {
        ByteBuffer b = ByteBuffer.allocate((int) t.byteSize()).order(ByteOrder.LITTLE_ENDIAN);
        t.device().copyToHost(t, b);
        return b.array();
    }

    static void assertSameWeights(LlamaWeights actual, LlamaWeights expected) {
        Map<String, Tensor> a = actual.hfTensors();
        Map<String, Tensor> e = expected.hfTensors();
        assertThat(a.keySet()).containsExactlyElementsOf(e.keySet());
        e.forEach((name, t) -> {
            assertThat(a.get(name).shape()).as(name).isEqualTo(t.shape());
            assertThat(raw(a.get(name))).as(name).isEqualTo(raw(t));
        });
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "F32"})
    void aWrittenRandomCheckpointLoadsBackBitExact(DType dtype) throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, dtype, 42)) {
            CheckpointWriter.write(random, dir);

            try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, dtype)) {
                assertThat(loaded.config()).isEqualTo(LLAMA.toBuilder().dtype(dtype).build());
                assertThat(loaded.dtype()).isEqualTo(dtype);
                assertThat(loaded.layers()).hasSize(2);
                assertThat(loaded.layer(0).qkvBias()).isNull();
                assertThat(loaded.tiedEmbeddings()).isFalse();
                assertSameWeights(loaded, random);
            }
            try (Checkpoint checkpoint = Checkpoint.open(dir)) {
                assertThat(checkpoint.names()).containsExactlyInAnyOrderElementsOf(random.hfTensors().keySet());
                assertThat(checkpoint.info("model.layers.1.self_attn.k_proj.weight").shape()).containsExactly(32, 64);
            }
        }
        assertThat(dir.resolve("model.safetensors")).exists();
    }

    @Test
    void aDeviceWithoutKernelsForTheHeadDimRefusesTheModelBeforeAllocating() {
        List<String> calls = new ArrayList<>();
        ComputeOps ops = (ComputeOps) Proxy.newProxyInstance(ComputeOps.class.getClassLoader(),
                new Class<?>[] {ComputeOps.class}, (self, method, args) -> {
                    throw new UnsupportedOnDeviceException("attention head dim " + args[0] + " has no kernels");
                });
        Device device = (Device) Proxy.newProxyInstance(Device.class.getClassLoader(), new Class<?>[] {Device.class},
                (self, method, args) -> {
                    calls.add(method.getName());
                    return switch (method.getName()) {
                        case "ops" -> ops;
                        case "name" -> "gpu-without-d16";
                        default -> throw new AssertionError(method.getName() + " called on a refused model");
                    };
                });
        assertThatThrownBy(() -> RandomWeights.create(LLAMA, device, DType.BF16, 1))
                .isInstanceOf(UnsupportedOnDeviceException.class)
                .hasMessage("gpu-without-d16 cannot serve this model (head_dim 16): attention head dim 16 has no kernels");
        assertThat(calls).doesNotContain("allocate");
    }

    @Test
    void fusedTensorsStackTheHuggingFaceMatricesInOrder() throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, DType.F32, 3)) {
            CheckpointWriter.write(random, dir);
        }
        int h = 64;
        try (LlamaWeights w = LlamaWeights.load(dir, cpu, DType.F32);
             SafetensorsFile file = SafetensorsFile.open(dir.resolve("model.safetensors"))) {
            float[] qkv = cpu.toFloats(w.layer(1).qkvWeight());
            float[] gateUp = cpu.toFloats(w.layer(1).gateUpWeight());
            assertThat(w.layer(1).qkvWeight().shape()).containsExactly((4 + 2 * 2) * 16, h);
            assertThat(w.layer(1).gateUpWeight().shape()).containsExactly(2 * 96, h);
            String p = "model.layers.1.";
            assertRows(file, p + "self_attn.q_proj.weight", qkv, 0, h);
            assertRows(file, p + "self_attn.k_proj.weight", qkv, 64, h);
            assertRows(file, p + "self_attn.v_proj.weight", qkv, 96, h);
            assertRows(file, p + "mlp.gate_proj.weight", gateUp, 0, h);
            assertRows(file, p + "mlp.up_proj.weight", gateUp, 96, h);
        }
    }

    /** Tensor {@code name} equals rows [firstRow, ...) of the fused row-major {@code fused}. */
    private void assertRows(SafetensorsFile file, String name, float[] fused, int firstRow, int rowLength) throws IOException {
        float[] part = cpu.toFloats(file.load(name, cpu, DType.F32));
        int from = firstRow * rowLength;
        assertThat(Arrays.copyOfRange(fused, from, from + part.length)).as(name).isEqualTo(part);
    }

    @Test
    void tiedEmbeddingsWriteNoLmHeadAndShareTheTensor() throws IOException {
        ModelConfig tied = LLAMA.toBuilder().tieWordEmbeddings(true).build();
        try (LlamaWeights random = RandomWeights.create(tied, cpu, DType.BF16, 5)) {
            assertThat(random.lmHead()).isSameAs(random.embedding());
            CheckpointWriter.write(random, dir);

            try (Checkpoint checkpoint = Checkpoint.open(dir)) {
                assertThat(checkpoint.contains("lm_head.weight")).isFalse();
            }
            try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, DType.BF16)) {
                assertThat(loaded.tiedEmbeddings()).isTrue();
                assertThat(loaded.lmHead()).isSameAs(loaded.embedding());
                assertSameWeights(loaded, random);
                long perLayer = 64 + 128 * 64 + 64 * 64 + 64 + 2 * 96 * 64 + 64 * 96;
                assertThat(loaded.byteSize()).isEqualTo(2 * (512 * 64 + 2 * perLayer + 64));
            }
        }
    }

    @Test
    void qwen2BiasesSurviveAShardedCheckpoint() throws IOException {
        try (LlamaWeights random = RandomWeights.create(QWEN, cpu, DType.BF16, 9)) {
            CheckpointWriter.write(random, dir, 20_000);

            assertThat(dir.resolve(Checkpoint.INDEX_FILE)).exists();
            assertThat(dir.resolve(Checkpoint.SINGLE_FILE)).doesNotExist();
            try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, DType.BF16)) {
                assertThat(loaded.config().qkvBias()).isTrue();
                assertThat(loaded.config().attentionWindow(2)).isEqualTo(32);
                assertThat(loaded.layer(2).qkvBias().shape()).containsExactly((6 + 2 * 2) * 8);
                assertThat(loaded.hfTensors()).containsKey("model.layers.2.self_attn.v_proj.bias");
                assertSameWeights(loaded, random);
            }
        }
    }

    @Test
    void anF32CheckpointLoadsAsTheBf16RandomModel() throws IOException {
        try (LlamaWeights f32 = RandomWeights.create(LLAMA, cpu, DType.F32, 11)) {
            CheckpointWriter.write(f32, dir);
        }
        try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, DType.BF16);
             LlamaWeights bf16 = RandomWeights.create(LLAMA, cpu, DType.BF16, 11)) {
            assertSameWeights(loaded, bf16);
        }
    }

    @Test
    void writeRandomWritesTheModelRandomWeightsBuilds() throws IOException {
        CheckpointWriter.writeRandom(QWEN, DType.BF16, 13, dir);

        try (LlamaWeights loaded = LlamaWeights.load(dir, cpu, DType.BF16);
             LlamaWeights expected = RandomWeights.create(QWEN, cpu, DType.BF16, 13)) {
            assertSameWeights(loaded, expected);
        }
    }

    @Test
    void theWrittenTokenizerAndGenerationConfigUseTheConfigsSpecialIds() throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, DType.BF16, 1)) {
            CheckpointWriter.write(random, dir);
        }
        assertThat(GenerationConfig.load(dir, ModelConfig.load(dir)).eosTokenIds()).containsExactly(501, 502);
        try (TextTokenizer tokenizer = TextTokenizer.load(dir)) {
            int[] ids = tokenizer.encode("a stream of text");
            assertThat(ids[0]).isEqualTo(500);
            assertThat(tokenizer.encode("<|end_of_text|><|end_of_text_1|>", false)).containsExactly(501, 502);
            assertThat(Arrays.stream(ids).max().getAsInt()).isLessThan(512);
            assertThat(tokenizer.decode(ids)).isEqualTo("a stream of text");
        }
    }

    @Test
    void aMissingTensorIsNamed() throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, DType.BF16, 2)) {
            CheckpointWriter.write(random, dir);
            SafetensorsWriter incomplete = new SafetensorsWriter();
            random.hfTensors().forEach((name, t) -> {
                if (!name.equals("model.layers.1.mlp.up_proj.weight")) {
                    incomplete.add(name, t);
                }
            });
            incomplete.writeFile(dir.resolve(Checkpoint.SINGLE_FILE));
        }

        assertThatThrownBy(() -> LlamaWeights.load(dir, cpu, DType.BF16))
                .isInstanceOf(ModelFormatException.class)
                .hasMessage("tensor model.layers.1.mlp.up_proj.weight not found in checkpoint " + dir);
    }

    @Test
    void aTensorOfTheWrongShapeIsNamed() throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, DType.BF16, 2)) {
            CheckpointWriter.write(random, dir);
        }
        ModelConfig wider = LLAMA.toBuilder().intermediateSize(128).build();

        try (Checkpoint checkpoint = Checkpoint.open(dir)) {
            assertThatThrownBy(() -> LlamaWeights.load(checkpoint, wider, cpu, DType.BF16))
                    .isInstanceOf(ModelFormatException.class)
                    .hasMessageContaining("tensor model.layers.0.mlp.gate_proj.weight")
                    .hasMessageContaining("has shape [96, 64], expected [128, 64]");
        }
    }

    @Test
    void randomWeightsAreSeededAndScaled() {
        try (LlamaWeights a = RandomWeights.create(LLAMA, cpu, DType.F32, 1);
             LlamaWeights b = RandomWeights.create(LLAMA, cpu, DType.F32, 1);
             LlamaWeights c = RandomWeights.create(LLAMA, cpu, DType.F32, 2)) {
            assertSameWeights(a, b);
            assertThat(raw(c.embedding())).isNotEqualTo(raw(a.embedding()));

            double[] embedding = moments(cpu.toFloats(a.embedding()));
            assertThat(embedding[0]).isCloseTo(0, org.assertj.core.data.Offset.offset(0.001));
            assertThat(embedding[1]).isCloseTo(0.02, org.assertj.core.data.Offset.offset(0.001));
            double[] norms = moments(cpu.toFloats(a.layer(0).postAttentionNorm()));
            assertThat(norms[0]).isCloseTo(1, org.assertj.core.data.Offset.offset(0.02));
            assertThat(norms[1]).isCloseTo(0.05, org.assertj.core.data.Offset.offset(0.015));
            // distinct tensors get distinct streams
            assertThat(raw(a.layer(0).downWeight())).isNotEqualTo(raw(a.layer(1).downWeight()));
        }
    }

    /** Mean and standard deviation. */
    private static double[] moments(float[] v) {
        double sum = 0;
        double squares = 0;
        for (float x : v) {
            sum += x;
            squares += (double) x * x;
        }
        double mean = sum / v.length;
        return new double[] {mean, Math.sqrt(squares / v.length - mean * mean)};
    }

    @Test
    void aFolderWithAnUnknownArchitectureIsRejectedByName() throws IOException {
        try (LlamaWeights random = RandomWeights.create(LLAMA, cpu, DType.BF16, 2)) {
            CheckpointWriter.write(random, dir);
        }
        Path config = dir.resolve(ModelConfig.FILE_NAME);
        Files.writeString(config, Files.readString(config).replace("LlamaForCausalLM", "FalconForCausalLM"));

        assertThatThrownBy(() -> LlamaWeights.load(dir, cpu, DType.BF16))
                .isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("unsupported architecture 'FalconForCausalLM'");
    }
}
