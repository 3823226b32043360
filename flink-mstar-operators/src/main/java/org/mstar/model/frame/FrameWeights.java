package org.mstar.model.frame;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.mstar.device.DType;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.model.ModelFormatException;
import org.mstar.model.io.Checkpoint;
import org.mstar.model.io.SafetensorsWriter;

/**
 * A frame model's tensors by their safetensors names (docs/guides/frames.md). Projections are {@code [out, in]}
 * (one row per output, as a Hugging Face Linear); a layer's q, k and v are one fused {@code qkv} whose rows
 * are q's heads, then k's, then v's.
 */
public final class FrameWeights implements AutoCloseable {
    private final Map<String, Tensor> tensors;

    private FrameWeights(Map<String, Tensor> tensors) {
        this.tensors = tensors;
    }

    /** Every tensor name and shape the config implies, in checkpoint order. */
    static Map<String, long[]> shapes(FrameModelConfig c) {
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put("embed.weight", new long[] {c.vocabSize(), c.hiddenSize()});
        s.put("action_embed.weight", new long[] {c.numActions(), c.hiddenSize()});
        for (int l = 0; l < c.numLayers(); l++) {
            String p = "layers." + l + ".";
            s.put(p + "input_norm.weight", new long[] {c.hiddenSize()});
            s.put(p + "qkv.weight", new long[] {c.qSize() + 2L * c.kvSize(), c.hiddenSize()});
            s.put(p + "o.weight", new long[] {c.hiddenSize(), c.qSize()});
            s.put(p + "post_norm.weight", new long[] {c.hiddenSize()});
            s.put(p + "gate_up.weight", new long[] {2L * c.intermediateSize(), c.hiddenSize()});
            s.put(p + "down.weight", new long[] {c.hiddenSize(), c.intermediateSize()});
        }
        s.put("final_norm.weight", new long[] {c.hiddenSize()});
        s.put("lm_head.weight", new long[] {c.vocabSize(), c.hiddenSize()});
        return s;
    }

    /** Loads every tensor {@code config} names from the folder's checkpoint, as {@code dtype} on {@code device}. */
    public static FrameWeights load(Path folder, FrameModelConfig config, Device device, DType dtype) throws IOException {
        Map<String, Tensor> out = new LinkedHashMap<>();
        try (Checkpoint ckpt = Checkpoint.open(folder)) {
            // every shape is checked before anything is uploaded
            for (Map.Entry<String, long[]> e : shapes(config).entrySet()) {
                long[] shape = ckpt.info(e.getKey()).shape();
                if (!Arrays.equals(shape, e.getValue())) {
                    throw new ModelFormatException(folder + ": " + e.getKey() + " is " + Arrays.toString(shape)
                            + ", the config implies " + Arrays.toString(e.getValue()));
                }
            }
            for (String name : shapes(config).keySet()) out.put(name, ckpt.load(name, device, dtype));
        }
        return new FrameWeights(out);
    }

    /**
     * Seeded random weights: projections and embeddings ~ N(0, 0.02²), norm weights ~ 1 + N(0, 0.05²); each
     * tensor draws from its own stream keyed by (seed, name), so equal seeds give equal models on every device.
     */
    public static FrameWeights random(FrameModelConfig config, Device device, DType dtype, long seed) {
        return random(config, device, dtype, seed, 0.02);
    }

    /**
     * Seeded random weights with projections and embeddings ~ N(0, projectionStd²): wider ones make a small model's
     * next frame depend more on the history it attends, which tests of that history need.
     */
    public static FrameWeights random(FrameModelConfig config, Device device, DType dtype, long seed,
                                      double projectionStd) {
        Map<String, Tensor> out = new LinkedHashMap<>();
        for (Map.Entry<String, long[]> e : shapes(config).entrySet()) {
            boolean norm = e.getKey().contains("norm");
            SplittableRandom random = new SplittableRandom(seed ^ (e.getKey().hashCode() * 0x9E3779B97F4A7C15L));
            long n = 1;
            for (long d : e.getValue()) n *= d;
            float[] v = new float[Math.toIntExact(n)];
            for (int i = 0; i < v.length; i++) v[i] = (float) ((norm ? 1 : 0) + gaussian(random) * (norm ? 0.05 : projectionStd));
            out.put(e.getKey(), device.fromFloats(v, dtype, e.getValue()));
        }
        return new FrameWeights(out);
    }

    /** Writes the checkpoint and the config into {@code folder}: what {@link #load} reads back. */
    public void save(FrameModelConfig config, Path folder) throws IOException {
        config.write(folder);
        SafetensorsWriter w = new SafetensorsWriter();
        tensors.forEach(w::add);
        w.writeFile(folder.resolve(Checkpoint.SINGLE_FILE));
    }

    public Tensor get(String name) {
        Tensor t = tensors.get(name);
        if (t == null) throw new IllegalArgumentException("no frame model tensor " + name);
        return t;
    }

    Tensor layer(int l, String name) {
        return get("layers." + l + "." + name + ".weight");
    }

    @Override
    public void close() {
        List<Tensor> all = new ArrayList<>(tensors.values());
        tensors.clear();
        all.forEach(Tensor::close);
    }

    /** Box-Muller on the stream's doubles, so the draw depends on nothing but the stream. */
    private static double gaussian(SplittableRandom r) {
        double u = 1 - r.nextDouble();
        return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r.nextDouble());
    }
}
