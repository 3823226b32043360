package org.mstar.model.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.device.DType;
import org.mstar.device.Tensor;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.device.cpu.CpuTensor;
import org.mstar.model.ModelFormatException;

class SafetensorsTest {
    private final CpuDevice cpu = new CpuDevice(1);

    @TempDir
    Path dir;

    @AfterEach
    void closeDevice() {
        cpu.close();
    }

    /** Values that exercise every rounding corner: NaN, infinities, signed zero, subnormals, ties. */
    private static float[] values(int n, long seed) {
        Random random = new Random(seed);
        float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -0.0f, 0f, Float.MIN_VALUE,
            1e-40f, 6e-8f, 65504f, 1e30f, 1.00390625f, -3.5f};
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = i < special.length ? special[i] : (float) random.nextGaussian();
        }
        return v;
    }

    private static byte[] raw(Tensor t) {
        ByteBuffer b = ByteBuffer.allocate((int) t.byteSize()).order(ByteOrder.LITTLE_ENDIAN);
        t.device().copyToHost(t, b);
        return b.array();
    }

    private static byte[] array(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    @ParameterizedTest
    @EnumSource(value = DType.class, names = {"BF16", "F16", "F32"})
    void roundTripKeepsEveryBit(DType dtype) throws IOException {
        Tensor matrix = cpu.fromFloats(values(7 * 9, 1), dtype, 7, 9);
        Tensor vector = cpu.fromFloats(values(5, 2), dtype, 5);
        Tensor scalar = cpu.fromFloats(new float[] {0.125f}, dtype);
        Tensor empty = cpu.zeros(dtype, 0, 4);
        Path file = dir.resolve("t.safetensors");
        // 40-byte chunks: the matrix goes out and comes back in several row slices
        new SafetensorsWriter(40).add("m", matrix).add("v", vector).add("s", scalar).add("e", empty).writeFile(file);

        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.names()).containsExactly("m", "v", "s", "e");
            assertThat(f.info("m").shape()).containsExactly(7, 9);
            assertThat(f.info("m").dtype()).isEqualTo(dtype);
            assertThat(f.info("s").shape()).isEmpty();
            assertThat(f.info("e").byteSize()).isZero();
            assertThat(array(f.bytes("m"))).isEqualTo(raw(matrix));
            for (String name : f.names()) {
                Tensor chunked = cpu.allocate(dtype, f.info(name).shape());
                f.copyTo(name, chunked, 40);
                assertThat(raw(chunked)).as(name).isEqualTo(raw(f.load(name, cpu, dtype)));
            }
            assertThat(raw(f.load("m", cpu, dtype))).isEqualTo(raw(matrix));
            assertThat(raw(f.load("v", cpu, dtype))).isEqualTo(raw(vector));
            assertThat(raw(f.load("s", cpu, dtype))).isEqualTo(raw(scalar));
        }
        // data starts 8-byte aligned after a space-padded header
        ByteBuffer head = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        assertThat(head.getLong(0) % 8).isZero();
        JsonNode header = new ObjectMapper().readTree(new String(Files.readAllBytes(file), 8,
                (int) head.getLong(0), StandardCharsets.UTF_8));
        assertThat(header.get("__metadata__").get("format").asText()).isEqualTo("pt");
    }

    @ParameterizedTest
    @ValueSource(longs = {32, 64L << 20})
    void loadingAsAnotherDtypeRoundsOnceToNearestEven(long chunkBytes) throws IOException {
        float[] data = values(6 * 8, 3);
        Path file = dir.resolve("f32.safetensors");
        new SafetensorsWriter().add("w", cpu.fromFloats(data, DType.F32, 6, 8)).writeFile(file);

        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            for (DType to : new DType[] {DType.BF16, DType.F16}) {
                Tensor loaded = cpu.allocate(to, 6, 8);
                f.copyTo("w", loaded, chunkBytes);
                assertThat(raw(loaded)).as("F32 -> " + to).isEqualTo(raw(cpu.fromFloats(data, to, 6, 8)));
            }
        }

        Tensor bf16 = cpu.fromFloats(data, DType.BF16, 6, 8);
        Path bf16File = dir.resolve("bf16.safetensors");
        new SafetensorsWriter().add("w", bf16).writeFile(bf16File);
        try (SafetensorsFile f = SafetensorsFile.open(bf16File)) {
            Tensor widened = cpu.allocate(DType.F32, 6, 8);
            f.copyTo("w", widened, chunkBytes);
            assertThat(cpu.toFloats(widened)).isEqualTo(CpuTensor.of(bf16).toFloatArray());
        }
    }

    @Test
    void shardedCheckpointReadsBackThroughTheIndex() throws IOException {
        SafetensorsWriter writer = new SafetensorsWriter();
        Tensor[] tensors = new Tensor[5];
        for (int i = 0; i < tensors.length; i++) {
            tensors[i] = cpu.fromFloats(values(4 * 16, 10 + i), DType.BF16, 4, 16); // 128 bytes each
            writer.add("layer." + i + ".weight", tensors[i]);
        }
        writer.writeCheckpoint(dir, 300);

        assertThat(dir.resolve(Checkpoint.SINGLE_FILE)).doesNotExist();
        JsonNode index = new ObjectMapper().readTree(dir.resolve(Checkpoint.INDEX_FILE).toFile());
        assertThat(index.get("metadata").get("total_size").asLong()).isEqualTo(5 * 128);
        assertThat(index.get("weight_map").get("layer.0.weight").asText()).isEqualTo("model-00001-of-00003.safetensors");
        assertThat(index.get("weight_map").get("layer.4.weight").asText()).isEqualTo("model-00003-of-00003.safetensors");
        try (Checkpoint c = Checkpoint.open(dir)) {
            assertThat(c.names()).hasSize(5);
            assertThat(c.info("layer.2.weight").file().getFileName().toString())
                    .isEqualTo("model-00002-of-00003.safetensors");
            for (int i = 0; i < tensors.length; i++) {
                assertThat(raw(c.load("layer." + i + ".weight", cpu, DType.BF16))).isEqualTo(raw(tensors[i]));
            }
        }
    }

    @Test
    void everythingWithinTheLimitIsOneFile() throws IOException {
        new SafetensorsWriter().add("a", cpu.zeros(DType.F32, 2, 2)).writeCheckpoint(dir, 1 << 20);
        assertThat(dir.resolve(Checkpoint.SINGLE_FILE)).exists();
        assertThat(dir.resolve(Checkpoint.INDEX_FILE)).doesNotExist();
        try (Checkpoint c = Checkpoint.open(dir)) {
            assertThat(c.names()).containsExactly("a");
        }
    }

    /** A file written by hand: metadata with extra keys, an int64 tensor, and a float one after it. */
    private Path handWritten(String header, int dataBytes) throws IOException {
        byte[] json = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + json.length + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(json.length).put(json);
        b.putLong(-1L).putLong(42L); // ids
        b.putFloat(1.5f).putFloat(-2f); // w
        Path file = dir.resolve("hand.safetensors");
        Files.write(file, b.array());
        return file;
    }

    @Test
    void metadataIsIgnoredAndOtherDtypesFailByName() throws IOException {
        Path file = handWritten("{\"__metadata__\":{\"format\":\"pt\",\"source\":\"hand\"},"
                + "\"ids\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                + "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24);

        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.names()).containsExactly("ids", "w");
            assertThat(cpu.toFloats(f.load("w", cpu, DType.F32))).containsExactly(1.5f, -2f);
            assertThat(f.info("ids").safetensorsDtype()).isEqualTo("I64");
            assertThatThrownBy(() -> f.load("ids", cpu, DType.F32))
                    .isInstanceOf(ModelFormatException.class)
                    .hasMessageContaining("tensor ids")
                    .hasMessageContaining("has dtype I64; supported: BF16, F16, F32");
        }
    }

    @Test
    void fp8TensorsAreOneByteAnElementAndLoadOnlyAsQuantisedWeights() throws IOException {
        Path wrongSize = handWritten("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[0,8]}}", 24);
        assertThatThrownBy(() -> SafetensorsFile.open(wrongSize)).hasMessageContaining("needs 3 bytes but data_offsets span 8");

        Path file = handWritten("{\"e4m3\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,4],\"data_offsets\":[0,8]},"
                + "\"e5m2\":{\"dtype\":\"F8_E5M2\",\"shape\":[8],\"data_offsets\":[8,16]}}", 24);
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.bytes("e4m3").remaining()).isEqualTo(8);
            assertThatThrownBy(() -> f.load("e4m3", cpu, DType.F32)).isInstanceOf(ModelFormatException.class)
                    .hasMessageContaining("tensor e4m3")
                    .hasMessageContaining("has dtype F8_E4M3; FP8 weights load only through a quantization_config");
            assertThatThrownBy(() -> f.load("e5m2", cpu, DType.F32))
                    .hasMessageContaining("has dtype F8_E5M2; FP8 E5M2 weights are not supported");
        }
    }

    @Test
    void floatAndIntTensorsReadAsArraysOfTheirDtypeOnly() throws IOException {
        // the hand-written ids bytes (int64 -1 and 42) read as four little-endian int32s
        Path file = handWritten("{\"ids\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                + "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24);
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.floats("w")).containsExactly(1.5f, -2f);
            assertThat(f.ints("ids")).containsExactly(-1, -1, 42, 0);
            assertThatThrownBy(() -> f.floats("ids")).isInstanceOf(ModelFormatException.class)
                    .hasMessageContaining("ids").hasMessageContaining("is not F32");
            assertThatThrownBy(() -> f.ints("w")).isInstanceOf(ModelFormatException.class)
                    .hasMessageContaining("is not I32");
        }
    }

    @Test
    void malformedFilesAreRejectedWithTheirName() throws IOException {
        Path outside = handWritten("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,32]}}", 24);
        assertThatThrownBy(() -> SafetensorsFile.open(outside)).isInstanceOf(ModelFormatException.class)
                .hasMessageContaining("hand.safetensors").hasMessageContaining("lie outside the 24 data bytes");

        Path wrongSize = handWritten("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,24]}}", 24);
        assertThatThrownBy(() -> SafetensorsFile.open(wrongSize)).hasMessageContaining("needs 12 bytes but data_offsets span 8");

        Path notJson = handWritten("{\"w\":", 24);
        assertThatThrownBy(() -> SafetensorsFile.open(notJson)).hasMessageContaining("header is not valid JSON");

        Path garbage = dir.resolve("garbage.safetensors");
        Files.write(garbage, new byte[] {(byte) 0xFF, 1, 2, 3, 4, 5, 6, 7, 8, 9});
        assertThatThrownBy(() -> SafetensorsFile.open(garbage)).hasMessageContaining("header length");
    }

    @Test
    void missingTensorsWrongShapesAndMissingFilesAreNamed() throws IOException {
        new SafetensorsWriter().add("model.norm.weight", cpu.zeros(DType.BF16, 8)).writeCheckpoint(dir, Long.MAX_VALUE);
        try (Checkpoint c = Checkpoint.open(dir)) {
            assertThatThrownBy(() -> c.info("lm_head.weight")).isInstanceOf(ModelFormatException.class)
                    .hasMessage("tensor lm_head.weight not found in checkpoint " + dir);
            assertThatThrownBy(() -> c.copyTo("model.norm.weight", cpu.zeros(DType.BF16, 16)))
                    .hasMessageContaining("tensor model.norm.weight")
                    .hasMessageContaining("has shape [8], expected [16]");
        }

        Path empty = Files.createDirectory(dir.resolve("empty"));
        assertThatThrownBy(() -> Checkpoint.open(empty))
                .hasMessage("no model.safetensors or model.safetensors.index.json in " + empty);

        Files.writeString(dir.resolve(Checkpoint.INDEX_FILE),
                "{\"weight_map\":{\"model.norm.weight\":\"model.safetensors\",\"lm_head.weight\":\"model.safetensors\"}}");
        assertThatThrownBy(() -> Checkpoint.open(dir))
                .hasMessageContaining("maps lm_head.weight to model.safetensors, which has no such tensor");
    }
}
