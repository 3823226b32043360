package org.mstar.model.io;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.ModelFormatException;

/**
 * One safetensors file, read through memory maps: an 8-byte little-endian header length, a JSON header
 * mapping each tensor name to {@code dtype}, {@code shape} and {@code data_offsets} (relative to the end of
 * the header), then the raw little-endian data. {@code __metadata__} is ignored.
 *
 * <p>Tensors are copied to a device in row chunks, each mapped on its own: a Java mapping holds at most 2 GiB,
 * and chunks keep conversion buffers small. Mappings outlive {@link #close()} until they are garbage
 * collected (Java 17 cannot unmap), so closing releases the file handle, not the address space.
 */
public final class SafetensorsFile implements AutoCloseable {
    /** The format caps the header at 100 MB; a larger value means a corrupt or foreign file. */
    private static final long MAX_HEADER_BYTES = 100L << 20;
    /** Largest slice mapped or converted at once. */
    private static final long CHUNK_BYTES = 64L << 20;

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path path;
    private final FileChannel channel;
    private final Map<String, TensorInfo> tensors;

    private SafetensorsFile(Path path, FileChannel channel, Map<String, TensorInfo> tensors) {
        this.path = path;
        this.channel = channel;
        this.tensors = tensors;
    }

    /**
     * Opens {@code path} and parses its header.
     *
     * @throws ModelFormatException when the header is malformed or a tensor's bytes do not fit its entry
     */
    public static SafetensorsFile open(Path path) throws IOException {
        FileChannel channel = FileChannel.open(path, StandardOpenOption.READ);
        try {
            return new SafetensorsFile(path, channel, readHeader(path, channel));
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    private static Map<String, TensorInfo> readHeader(Path path, FileChannel channel) throws IOException {
        long size = channel.size();
        if (size < 8) {
            throw new ModelFormatException(path + ": not a safetensors file (" + size + " bytes)");
        }
        ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        readFully(channel, lengthBytes, 0);
        long headerLength = lengthBytes.getLong(0);
        if (headerLength <= 0 || headerLength > MAX_HEADER_BYTES || 8 + headerLength > size) {
            throw new ModelFormatException(path + ": header length " + headerLength + " does not fit a file of "
                    + size + " bytes");
        }
        ByteBuffer headerBytes = ByteBuffer.allocate((int) headerLength);
        readFully(channel, headerBytes, 8);
        JsonNode header;
        try {
            header = JSON.readTree(headerBytes.array());
        } catch (IOException e) {
            throw new ModelFormatException(path + ": header is not valid JSON", e);
        }
        if (header == null || !header.isObject()) {
            throw new ModelFormatException(path + ": header is not a JSON object");
        }
        long dataStart = 8 + headerLength;
        long dataLength = size - dataStart;
        Map<String, TensorInfo> tensors = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getKey().equals("__metadata__")) {
                tensors.put(e.getKey(), entry(path, e.getKey(), e.getValue(), dataStart, dataLength));
            }
        }
        return Collections.unmodifiableMap(tensors);
    }

    private static TensorInfo entry(Path path, String name, JsonNode node, long dataStart, long dataLength) {
        JsonNode dtype = node.get("dtype");
        JsonNode shapeNode = node.get("shape");
        JsonNode offsets = node.get("data_offsets");
        if (dtype == null || !dtype.isTextual() || shapeNode == null || !shapeNode.isArray()
                || offsets == null || !offsets.isArray() || offsets.size() != 2) {
            throw new ModelFormatException(path + ": header entry of " + name
                    + " needs dtype, shape and data_offsets [begin, end], got " + node);
        }
        long[] shape = new long[shapeNode.size()];
        for (int i = 0; i < shape.length; i++) {
            shape[i] = nonNegative(path, name, shapeNode.get(i));
        }
        long begin = nonNegative(path, name, offsets.get(0));
        long end = nonNegative(path, name, offsets.get(1));
        if (begin > end || end > dataLength) {
            throw new ModelFormatException(path + ": data_offsets [" + begin + ", " + end + "] of " + name
                    + " lie outside the " + dataLength + " data bytes");
        }
        TensorInfo info = new TensorInfo(name, path, dtype.textValue(), shape, dataStart + begin, end - begin);
        DType d = SafetensorsDtypes.toDType(info.safetensorsDtype());
        int elementBytes = d != null ? d.bytes() : info.safetensorsDtype().equals(SafetensorsDtypes.F8_E4M3) ? 1 : 0;
        if (elementBytes > 0 && info.numel() * elementBytes != info.byteSize()) {
            throw new ModelFormatException(path + ": " + info + " needs " + info.numel() * elementBytes
                    + " bytes but data_offsets span " + info.byteSize());
        }
        return info;
    }

    private static long nonNegative(Path path, String name, JsonNode n) {
        if (n == null || !n.isIntegralNumber() || n.longValue() < 0) {
            throw new ModelFormatException(path + ": header entry of " + name + " has a bad number " + n);
        }
        return n.longValue();
    }

    private static void readFully(FileChannel channel, ByteBuffer dst, long position) throws IOException {
        while (dst.hasRemaining()) {
            int n = channel.read(dst, position + dst.position());
            if (n < 0) {
                throw new ModelFormatException("unexpected end of file");
            }
        }
    }

    public Path path() {
        return path;
    }

    /** Tensor names in header order. */
    public Set<String> names() {
        return tensors.keySet();
    }

    public boolean contains(String name) {
        return tensors.containsKey(name);
    }

    /** @throws ModelFormatException naming the tensor and this file when absent */
    public TensorInfo info(String name) {
        TensorInfo info = tensors.get(name);
        if (info == null) {
            throw new ModelFormatException("tensor " + name + " not found in " + path);
        }
        return info;
    }

    /**
     * The raw little-endian bytes of a tensor, as a read-only mapped buffer.
     *
     * @throws IllegalArgumentException for a tensor over 2 GiB (use {@link #copyTo})
     */
    public ByteBuffer bytes(String name) throws IOException {
        TensorInfo info = info(name);
        if (info.byteSize() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(info + " is too large for one buffer; copy it to a device instead");
        }
        return map(info.fileOffset(), info.byteSize());
    }

    /** The values of an F32 tensor. @throws ModelFormatException for another dtype */
    public float[] floats(String name) throws IOException {
        var fb = bytes(requireDtype(name, "F32")).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        float[] out = new float[fb.remaining()];
        fb.get(out);
        return out;
    }

    /** The values of an I32 tensor. @throws ModelFormatException for another dtype */
    public int[] ints(String name) throws IOException {
        var ib = bytes(requireDtype(name, "I32")).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        int[] out = new int[ib.remaining()];
        ib.get(out);
        return out;
    }

    private String requireDtype(String name, String dtype) {
        TensorInfo info = info(name);
        if (!info.safetensorsDtype().equals(dtype)) {
            throw new ModelFormatException(info + " in " + path + " is not " + dtype);
        }
        return name;
    }

    /**
     * Copies tensor {@code name} into {@code dst}, which must have the same shape. Equal dtypes copy raw bytes
     * (exact); otherwise each element is converted through fp32 with round-to-nearest-even.
     *
     * @throws ModelFormatException when the shapes differ or the stored dtype is unsupported, naming the tensor
     */
    public void copyTo(String name, Tensor dst) throws IOException {
        copyTo(name, dst, CHUNK_BYTES);
    }

    /** {@link #copyTo(String, Tensor)} mapping at most {@code chunkBytes} at a time (tests use small chunks). */
    void copyTo(String name, Tensor dst, long chunkBytes) throws IOException {
        TensorInfo info = info(name);
        DType from = info.dtype();
        if (!Arrays.equals(info.shape(), dst.shape())) {
            throw new ModelFormatException("tensor " + name + " in " + path + " has shape "
                    + Arrays.toString(info.shape()) + ", expected " + Arrays.toString(dst.shape()));
        }
        DType to = dst.dtype();
        if (!to.isFloat()) {
            throw new IllegalArgumentException("cannot load " + info + " into a " + to + " tensor");
        }
        long numel = info.numel();
        if (numel == 0) {
            return;
        }
        Device device = dst.device();
        long rows = dst.rank() == 0 ? 1 : dst.dim(0);
        long rowElems = numel / rows;
        long rowsPerChunk = Math.max(1, chunkBytes / (rowElems * Math.max(from.bytes(), to.bytes())));
        ByteBuffer converted = from == to ? null
                : ByteBuffer.allocateDirect(Math.toIntExact(Math.min(rows, rowsPerChunk) * rowElems * to.bytes()))
                        .order(ByteOrder.LITTLE_ENDIAN);
        for (long row = 0; row < rows; row += rowsPerChunk) {
            long n = Math.min(rowsPerChunk, rows - row);
            ByteBuffer src = map(info.fileOffset() + row * rowElems * from.bytes(), n * rowElems * from.bytes());
            Tensor view = dst.rank() == 0 ? dst : dst.rows(row, n);
            if (converted == null) {
                device.copyFromHost(src, view);
            } else {
                int count = Math.toIntExact(n * rowElems);
                HostFloats.convert(src, from, converted, to, count);
                device.copyFromHost(converted.clear().limit(count * to.bytes()), view);
            }
        }
    }

    /** Allocates a {@code dtype} tensor of the stored shape on {@code device} and {@link #copyTo copies} into it. */
    public Tensor load(String name, Device device, DType dtype) throws IOException {
        Tensor t = device.allocate(dtype, info(name).shape());
        try {
            copyTo(name, t);
            return t;
        } catch (IOException | RuntimeException e) {
            t.close();
            throw e;
        }
    }

    private ByteBuffer map(long offset, long length) throws IOException {
        return channel.map(FileChannel.MapMode.READ_ONLY, offset, length).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    public void close() throws IOException {
        channel.close();
    }

    @Override
    public String toString() {
        return "SafetensorsFile(" + path + ", " + tensors.size() + " tensors)";
    }
}
