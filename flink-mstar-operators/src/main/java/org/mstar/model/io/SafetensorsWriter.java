package org.mstar.model.io;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.mstar.device.DType;
import org.mstar.device.Tensor;

/**
 * Writes device tensors (BF16, F16 or F32, and FP8 codes held in U8 tensors) as safetensors: one file, or a Hugging Face checkpoint that
 * {@link Checkpoint} reads back (one {@value Checkpoint#SINGLE_FILE}, or shards plus
 * {@value Checkpoint#INDEX_FILE}). Tensors are downloaded in row chunks while writing, so the host never holds
 * a whole tensor. The header carries {@code "format": "pt"}, which transformers requires to load a file.
 */
public final class SafetensorsWriter {
    private static final long CHUNK_BYTES = 64L << 20;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, Tensor> tensors = new LinkedHashMap<>();
    private final Map<String, String> dtypeNames = new LinkedHashMap<>();
    private final long chunkBytes;

    public SafetensorsWriter() {
        this(CHUNK_BYTES);
    }

    /** A writer downloading at most {@code chunkBytes} at a time (tests use small chunks). */
    SafetensorsWriter(long chunkBytes) {
        this.chunkBytes = chunkBytes;
    }

    /** Adds {@code tensor} under {@code name}; it is read when a write method runs. */
    public SafetensorsWriter add(String name, Tensor tensor) {
        return add(name, tensor, SafetensorsDtypes.name(tensor.dtype())); // fails now, not halfway through a write
    }

    /** Adds the U8 tensor {@code codes} under {@code name} as F8_E4M3 (OCP E4M3FN codes, one byte each). */
    public SafetensorsWriter addFp8(String name, Tensor codes) {
        if (codes.dtype() != DType.U8) {
            throw new IllegalArgumentException("FP8 codes must be a U8 tensor, got " + codes.dtype());
        }
        return add(name, codes, SafetensorsDtypes.F8_E4M3);
    }

    private SafetensorsWriter add(String name, Tensor tensor, String dtypeName) {
        if (tensors.putIfAbsent(name, tensor) != null) {
            throw new IllegalArgumentException("tensor " + name + " added twice");
        }
        dtypeNames.put(name, dtypeName);
        return this;
    }

    /** Writes every added tensor, in the order added, to {@code file}. */
    public void writeFile(Path file) throws IOException {
        write(file, new ArrayList<>(tensors.keySet()));
    }

    /**
     * Writes a checkpoint into {@code folder}: {@value Checkpoint#SINGLE_FILE} when everything fits in
     * {@code maxShardBytes}, otherwise {@code model-0000i-of-0000n.safetensors} shards filled in order (a tensor
     * larger than the limit gets a shard of its own) and the index.
     */
    public void writeCheckpoint(Path folder, long maxShardBytes) throws IOException {
        List<List<String>> shards = new ArrayList<>();
        long shardBytes = 0;
        for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
            long bytes = e.getValue().byteSize();
            if (shards.isEmpty() || (shardBytes + bytes > maxShardBytes && shardBytes > 0)) {
                shards.add(new ArrayList<>());
                shardBytes = 0;
            }
            shards.get(shards.size() - 1).add(e.getKey());
            shardBytes += bytes;
        }
        Files.createDirectories(folder);
        if (shards.size() <= 1) {
            writeFile(folder.resolve(Checkpoint.SINGLE_FILE));
            return;
        }
        ObjectNode index = JSON.createObjectNode();
        index.putObject("metadata").put("total_size", tensors.values().stream().mapToLong(Tensor::byteSize).sum());
        ObjectNode weightMap = index.putObject("weight_map");
        for (int i = 0; i < shards.size(); i++) {
            String file = String.format("model-%05d-of-%05d.safetensors", i + 1, shards.size());
            write(folder.resolve(file), shards.get(i));
            shards.get(i).forEach(name -> weightMap.put(name, file));
        }
        JSON.writerWithDefaultPrettyPrinter().writeValue(folder.resolve(Checkpoint.INDEX_FILE).toFile(), index);
    }

    private void write(Path file, List<String> names) throws IOException {
        ObjectNode header = JSON.createObjectNode();
        header.putObject("__metadata__").put("format", "pt");
        long offset = 0;
        for (String name : names) {
            Tensor t = tensors.get(name);
            ObjectNode entry = header.putObject(name);
            entry.put("dtype", dtypeNames.get(name));
            var shape = entry.putArray("shape");
            for (long d : t.shape()) {
                shape.add(d);
            }
            entry.putArray("data_offsets").add(offset).add(offset + t.byteSize());
            offset += t.byteSize();
        }
        byte[] json = JSON.writeValueAsBytes(header);
        int padded = (json.length + 7) / 8 * 8; // spaces keep the data 8-byte aligned, as the reference writer does
        ByteBuffer head = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
        head.putLong(padded).put(json);
        while (head.hasRemaining()) {
            head.put((byte) ' ');
        }
        try (FileChannel out = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            writeFully(out, head.flip());
            for (String name : names) {
                writeTensor(out, tensors.get(name));
            }
        }
    }

    private void writeTensor(FileChannel out, Tensor t) throws IOException {
        if (t.numel() == 0) {
            return;
        }
        long rows = t.rank() == 0 ? 1 : t.dim(0);
        long rowBytes = t.byteSize() / rows;
        long rowsPerChunk = Math.max(1, chunkBytes / rowBytes);
        ByteBuffer buf = ByteBuffer.allocateDirect(Math.toIntExact(Math.min(rows, rowsPerChunk) * rowBytes))
                .order(ByteOrder.LITTLE_ENDIAN);
        for (long row = 0; row < rows; row += rowsPerChunk) {
            long n = Math.min(rowsPerChunk, rows - row);
            int bytes = Math.toIntExact(n * rowBytes);
            buf.clear().limit(bytes);
            t.device().copyToHost(t.rank() == 0 ? t : t.rows(row, n), buf);
            writeFully(out, buf.limit(bytes).position(0)); // whether or not the device moved the position
        }
    }

    private static void writeFully(FileChannel out, ByteBuffer buf) throws IOException {
        while (buf.hasRemaining()) {
            out.write(buf);
        }
    }
}
