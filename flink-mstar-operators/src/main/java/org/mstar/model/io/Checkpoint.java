package org.mstar.model.io;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * The tensors of a Hugging Face model folder: either one {@value #SINGLE_FILE}, or shards listed by
 * {@value #INDEX_FILE}, whose {@code weight_map} maps each tensor name to its shard file. Not thread-safe.
 */
public final class Checkpoint implements AutoCloseable {
    public static final String SINGLE_FILE = "model.safetensors";
    public static final String INDEX_FILE = "model.safetensors.index.json";

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path folder;
    private final Map<String, SafetensorsFile> fileByTensor;
    private final Map<String, SafetensorsFile> files;

    private Checkpoint(Path folder, Map<String, SafetensorsFile> fileByTensor, Map<String, SafetensorsFile> files) {
        this.folder = folder;
        this.fileByTensor = Collections.unmodifiableMap(fileByTensor);
        this.files = files;
    }

    /**
     * Opens the checkpoint in {@code folder}, preferring the index when both forms are present.
     *
     * @throws ModelFormatException when neither file exists, the index is malformed, or it names a tensor its
     *     shard lacks
     */
    public static Checkpoint open(Path folder) throws IOException {
        Path index = folder.resolve(INDEX_FILE);
        Map<String, SafetensorsFile> files = new LinkedHashMap<>();
        Map<String, SafetensorsFile> byTensor = new LinkedHashMap<>();
        try {
            if (Files.exists(index)) {
                for (Map.Entry<String, String> e : weightMap(index).entrySet()) {
                    SafetensorsFile shard = files.get(e.getValue());
                    if (shard == null) {
                        shard = SafetensorsFile.open(folder.resolve(e.getValue()));
                        files.put(e.getValue(), shard);
                    }
                    if (!shard.contains(e.getKey())) {
                        throw new ModelFormatException(index + " maps " + e.getKey() + " to " + e.getValue()
                                + ", which has no such tensor");
                    }
                    byTensor.put(e.getKey(), shard);
                }
            } else if (Files.exists(folder.resolve(SINGLE_FILE))) {
                SafetensorsFile file = SafetensorsFile.open(folder.resolve(SINGLE_FILE));
                files.put(SINGLE_FILE, file);
                file.names().forEach(name -> byTensor.put(name, file));
            } else {
                throw new ModelFormatException("no " + SINGLE_FILE + " or " + INDEX_FILE + " in " + folder);
            }
        } catch (IOException | RuntimeException e) {
            IOException closing = closeAll(files.values());
            if (closing != null) {
                e.addSuppressed(closing);
            }
            throw e;
        }
        return new Checkpoint(folder, byTensor, files);
    }

    private static Map<String, String> weightMap(Path index) throws IOException {
        JsonNode map = JSON.readTree(index.toFile()).get("weight_map");
        if (map == null || !map.isObject()) {
            throw new ModelFormatException(index + ": missing 'weight_map' object");
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = map.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String file = e.getValue().textValue();
            if (file == null || file.isEmpty() || file.contains("/") || file.contains("\\")) {
                throw new ModelFormatException(index + ": weight_map entry " + e.getKey()
                        + " must name a shard file in the same folder, got " + e.getValue());
            }
            out.put(e.getKey(), file);
        }
        return out;
    }

    public Path folder() {
        return folder;
    }

    /** Every tensor name, in index (or header) order. */
    public Set<String> names() {
        return fileByTensor.keySet();
    }

    public boolean contains(String name) {
        return fileByTensor.containsKey(name);
    }

    /** @throws ModelFormatException naming the tensor and this folder when absent */
    public TensorInfo info(String name) {
        return file(name).info(name);
    }

    /** See {@link SafetensorsFile#bytes}. */
    public ByteBuffer bytes(String name) throws IOException {
        return file(name).bytes(name);
    }

    /** See {@link SafetensorsFile#copyTo}. */
    public void copyTo(String name, Tensor dst) throws IOException {
        file(name).copyTo(name, dst);
    }

    /** See {@link SafetensorsFile#load}. */
    public Tensor load(String name, Device device, DType dtype) throws IOException {
        return file(name).load(name, device, dtype);
    }

    private SafetensorsFile file(String name) {
        SafetensorsFile f = fileByTensor.get(name);
        if (f == null) {
            throw new ModelFormatException("tensor " + name + " not found in checkpoint " + folder);
        }
        return f;
    }

    @Override
    public void close() throws IOException {
        IOException failure = closeAll(files.values());
        if (failure != null) {
            throw failure;
        }
    }

    /** Closes every file; returns the first failure with later ones suppressed, or null. */
    private static IOException closeAll(Iterable<SafetensorsFile> files) {
        IOException first = null;
        for (SafetensorsFile f : files) {
            try {
                f.close();
            } catch (IOException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        return first;
    }
}
