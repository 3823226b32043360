package org.mstar.model.lora;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.mstar.device.DType;
import org.mstar.model.ModelConfig;
import org.mstar.model.ModelFormatException;
import org.mstar.model.io.HostFloats;
import org.mstar.model.io.SafetensorsFile;
import org.mstar.model.io.TensorInfo;
import org.mstar.resources.AdapterLibrary;
import org.mstar.resources.AdapterTarget;
import org.mstar.resources.AdapterWeights;

/**
 * A folder of PEFT LoRA adapters for one model, each a subfolder named after the adapter, holding
 * {@value PeftAdapterConfig#FILE_NAME} and {@value #WEIGHTS_FILE} with tensors such as
 * {@code base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight} ({@code [r, in]}) and
 * {@code ...lora_B.weight} ({@code [out, r]}), every layer for every targeted module.
 *
 * <p>{@link #open} reads every adapter's config and tensor header and checks them against the model, so a bad adapter
 * fails the engine's start, naming it, rather than a request; weights are read when a slot takes the adapter
 * ({@link #load}), so adapters on disk cost no memory until used. Adapters added to the folder later are not seen,
 * and an adapter's files must not change while the engine runs (its identity is taken at open).
 */
public final class PeftAdapters implements AdapterLibrary {
    public static final String WEIGHTS_FILE = "adapter_model.safetensors";
    /** PEFT's tensor names for a causal LM, and the same without the wrappers' prefixes. */
    private static final Pattern TENSOR = Pattern.compile("(?:base_model\\.model\\.)?(?:model\\.)?"
            + "layers\\.(\\d+)\\.((?:self_attn|mlp)\\.\\w+)\\.lora_([AB])\\.weight");
    /** Bytes of each end of the weights file that the identity reads. */
    private static final int SAMPLE_BYTES = 1 << 20;

    private final Path folder;
    private final ModelConfig model;
    private final Map<String, Adapter> adapters;
    private final List<AdapterTarget> targets;
    private final int maxRank;

    /** One adapter: its folder, config, tensor names by module and layer, and identity. */
    private record Adapter(Path folder, PeftAdapterConfig config, Map<LoraModule, String[][]> tensors,
                           byte[] identity) {}

    private PeftAdapters(Path folder, ModelConfig model, Map<String, Adapter> adapters) {
        this.folder = folder;
        this.model = model;
        this.adapters = adapters;
        Set<LoraModule> targeted = EnumSet.noneOf(LoraModule.class);
        adapters.values().forEach(a -> targeted.addAll(a.config().targets()));
        this.targets = targeted.stream().map(m -> m.target(model)).toList();
        this.maxRank = adapters.values().stream().mapToInt(a -> a.config().rank()).max().orElse(1);
    }

    /**
     * Every adapter in {@code folder}, checked against {@code model}. Hidden entries and plain files are passed over;
     * every other entry must be an adapter.
     *
     * @throws ModelFormatException naming the adapter and what is wrong with it, or the folder when it is none
     */
    public static PeftAdapters open(Path folder, ModelConfig model) throws IOException {
        if (!Files.isDirectory(folder)) {
            throw new ModelFormatException("adapters folder " + folder + " is not a directory");
        }
        Map<String, Adapter> adapters = new TreeMap<>();
        try (Stream<Path> entries = Files.list(folder)) {
            for (Path dir : entries.filter(Files::isDirectory).filter(p -> !p.getFileName().toString().startsWith("."))
                    .sorted().toList()) {
                adapters.put(dir.getFileName().toString(), adapter(dir, model));
            }
        }
        return new PeftAdapters(folder, model, adapters);
    }

    private static Adapter adapter(Path dir, ModelConfig model) throws IOException {
        String name = dir.getFileName().toString();
        if (!Files.exists(dir.resolve(PeftAdapterConfig.FILE_NAME))) {
            throw new ModelFormatException("adapter '" + name + "' (" + dir + ") has no "
                    + PeftAdapterConfig.FILE_NAME);
        }
        Path weights = dir.resolve(WEIGHTS_FILE);
        if (!Files.exists(weights)) {
            throw new ModelFormatException("adapter '" + name + "' (" + dir + ") has no " + WEIGHTS_FILE
                    + (Files.exists(dir.resolve("adapter_model.bin")) ? " (adapter_model.bin, a pickle, is not read:"
                    + " save the adapter with safe_serialization)" : ""));
        }
        PeftAdapterConfig config = PeftAdapterConfig.read(dir, model);
        try (SafetensorsFile file = SafetensorsFile.open(weights)) {
            return new Adapter(dir, config, tensorNames(name, file, config, model), identity(dir, weights));
        }
    }

    /**
     * Per targeted module and layer, the names of its {@code lora_A} and {@code lora_B}, each checked for its shape;
     * a tensor of anything else is refused.
     */
    private static Map<LoraModule, String[][]> tensorNames(String name, SafetensorsFile file, PeftAdapterConfig config,
                                                           ModelConfig model) {
        Map<LoraModule, String[][]> byModule = new EnumMap<>(LoraModule.class);
        Map<String, LoraModule> byPath = new HashMap<>();
        for (LoraModule m : config.targets()) {
            byModule.put(m, new String[model.numLayers()][2]);
            byPath.put(m.path(), m);
        }
        String where = "adapter '" + name + "' (" + file.path() + ")";
        for (String tensor : file.names()) {
            Matcher match = TENSOR.matcher(tensor);
            LoraModule module = match.matches() ? byPath.get(match.group(2)) : null;
            int layer = module == null ? -1 : Integer.parseInt(match.group(1));
            if (module == null || layer >= model.numLayers()) {
                throw new ModelFormatException(where + ": tensor " + tensor + " is not the lora_A or lora_B of a"
                        + " targeted module (" + config.targets().stream().map(LoraModule::peftName).sorted().toList()
                        + ") in layers 0.." + (model.numLayers() - 1));
            }
            boolean isA = match.group(3).equals("A");
            AdapterTarget t = module.target(model);
            long[] want = isA ? new long[] {config.rank(), t.inFeatures()}
                    : new long[] {t.outFeatures(), config.rank()};
            TensorInfo info = file.info(tensor);
            if (!Arrays.equals(info.shape(), want)) {
                throw new ModelFormatException(where + ": " + tensor + " is " + Arrays.toString(info.shape())
                        + ", expected " + Arrays.toString(want) + " (r = " + config.rank() + ")");
            }
            if (!info.dtype().isFloat()) {
                throw new ModelFormatException(where + ": " + tensor + " is " + info.dtype() + ", not a float tensor");
            }
            byModule.get(module)[layer][isA ? 0 : 1] = tensor;
        }
        byModule.forEach((m, layers) -> {
            for (int l = 0; l < layers.length; l++) {
                if (layers[l][0] == null || layers[l][1] == null) {
                    throw new ModelFormatException(where + ": " + m.peftName() + " of layer " + l + " lacks its lora_"
                            + (layers[l][0] == null ? "A" : "B") + " (target_modules names it; every layer needs"
                            + " both)");
                }
            }
        });
        return byModule;
    }

    /** SHA-256 of the config's bytes and the weights' size and first and last MiB: cheap, and differs per fine-tune. */
    private static byte[] identity(Path dir, Path weights) throws IOException {
        MessageDigest sha = sha256();
        sha.update(Files.readAllBytes(dir.resolve(PeftAdapterConfig.FILE_NAME)));
        try (FileChannel ch = FileChannel.open(weights, StandardOpenOption.READ)) {
            long size = ch.size();
            sha.update(ByteBuffer.allocate(Long.BYTES).putLong(0, size));
            read(ch, sha, 0, Math.min(size, SAMPLE_BYTES));
            long tail = Math.max(Math.min(size, SAMPLE_BYTES), size - SAMPLE_BYTES);
            read(ch, sha, tail, size - tail);
        }
        return sha.digest();
    }

    private static void read(FileChannel ch, MessageDigest sha, long position, long length) throws IOException {
        ByteBuffer buf = ByteBuffer.allocate((int) length);
        while (buf.hasRemaining()) {
            if (ch.read(buf, position + buf.position()) < 0) {
                throw new IOException("file shrank while read");
            }
        }
        sha.update(buf.flip());
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK provides SHA-256", e);
        }
    }

    /** {@code name}'s config, as read at open. */
    public PeftAdapterConfig config(String name) {
        return adapter(name).config();
    }

    @Override
    public List<String> names() {
        return List.copyOf(adapters.keySet());
    }

    @Override
    public boolean contains(String name) {
        return adapters.containsKey(name);
    }

    @Override
    public List<AdapterTarget> targets() {
        return targets;
    }

    @Override
    public int layers() {
        return model.numLayers();
    }

    @Override
    public int maxRank() {
        return maxRank;
    }

    @Override
    public byte[] identity(String name) {
        return adapter(name).identity().clone();
    }

    @Override
    public AdapterWeights load(String name) {
        Adapter adapter = adapter(name);
        Map<String, List<float[]>> a = new HashMap<>();
        Map<String, List<float[]>> b = new HashMap<>();
        try (SafetensorsFile file = SafetensorsFile.open(adapter.folder().resolve(WEIGHTS_FILE))) {
            for (Map.Entry<LoraModule, String[][]> e : adapter.tensors().entrySet()) {
                List<float[]> as = new ArrayList<>();
                List<float[]> bs = new ArrayList<>();
                for (String[] layer : e.getValue()) {
                    as.add(floats(file, layer[0]));
                    bs.add(floats(file, layer[1]));
                }
                a.put(e.getKey().peftName(), as);
                b.put(e.getKey().peftName(), bs);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read adapter '" + name + "' in " + adapter.folder(), e);
        }
        PeftAdapterConfig c = adapter.config();
        return new AdapterWeights(name, c.rank(), c.scale(), a, b);
    }

    /** A tensor's values widened to fp32, whatever float dtype it is stored in. */
    private static float[] floats(SafetensorsFile file, String tensor) throws IOException {
        DType dtype = file.info(tensor).dtype();
        ByteBuffer bytes = file.bytes(tensor).order(ByteOrder.LITTLE_ENDIAN);
        float[] out = new float[(int) file.info(tensor).numel()];
        for (int i = 0; i < out.length; i++) {
            out[i] = HostFloats.get(bytes, dtype, i);
        }
        return out;
    }

    private Adapter adapter(String name) {
        Adapter a = adapters.get(name);
        if (a == null) {
            throw new IllegalArgumentException("no adapter '" + name + "' in " + folder);
        }
        return a;
    }
}
