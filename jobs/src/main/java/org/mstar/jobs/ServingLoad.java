package org.mstar.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * The requests of one serving-benchmark run: each a prompt length, an output length (EOS ignored, so every run
 * generates exactly these) and when it arrives. Prompts are random token ids, made from the request's index, so
 * both sides of a run (bare engine and Flink job) get the same ones.
 *
 * @param name what the run is called in tables and files, e.g. {@code "1000/1000"} or {@code "chat mix"}
 * @param requests in arrival order
 */
record ServingLoad(String name, List<Request> requests) {
    /** @param arrivalSeconds after the run's start; 0 for every request of an offline run */
    record Request(int promptLen, int outputLen, double arrivalSeconds) {}

    ServingLoad {
        requests = List.copyOf(requests);
    }

    long promptTokens() {
        return requests.stream().mapToLong(Request::promptLen).sum();
    }

    long outputTokens() {
        return requests.stream().mapToLong(Request::outputLen).sum();
    }

    int longestSequence() {
        return requests.stream().mapToInt(r -> r.promptLen() + r.outputLen()).max().orElse(1);
    }

    /** {@code n} requests of {@code promptLen} in, {@code outputLen} out, all at the start. */
    static ServingLoad fixed(int n, int promptLen, int outputLen) {
        List<Request> r = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            r.add(new Request(promptLen, outputLen, 0));
        }
        return new ServingLoad(promptLen + "/" + outputLen, r);
    }

    /**
     * A synthetic length mix shaped like chat traces (ShareGPT-style: many short turns, a long tail): prompt and
     * output lengths each log-normal, prompts with median 128 and sigma 1.1 within [4, 2048], outputs with median
     * 160 and sigma 0.9 within [4, 1024] (means about 230 tokens each), drawn with {@code seed}.
     */
    static ServingLoad chatMix(int n, long seed) {
        Random rnd = new Random(seed);
        List<Request> r = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            r.add(new Request(logNormal(rnd, 128, 1.1, 4, 2048), logNormal(rnd, 160, 0.9, 4, 1024), 0));
        }
        return new ServingLoad("chat mix", r);
    }

    private static int logNormal(Random rnd, double median, double sigma, int min, int max) {
        double v = median * Math.exp(sigma * rnd.nextGaussian());
        return (int) Math.max(min, Math.min(max, Math.round(v)));
    }

    /**
     * One request per line of a JSON-lines file: {@code {"prompt_len": N, "output_len": M}}, in the file's order.
     *
     * @throws IllegalArgumentException naming the file and line of a line without both positive lengths
     */
    static ServingLoad jsonl(Path file) throws IOException {
        ObjectMapper json = new ObjectMapper();
        List<Request> r = new ArrayList<>();
        List<String> lines = Files.readAllLines(file);
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).strip();
            if (line.isEmpty()) {
                continue;
            }
            JsonNode node;
            try {
                node = json.readTree(line);
            } catch (IOException e) {
                throw new IllegalArgumentException(file + " line " + (i + 1) + ": not JSON");
            }
            int p = node.path("prompt_len").asInt(0);
            int o = node.path("output_len").asInt(0);
            if (p < 1 || o < 1) {
                throw new IllegalArgumentException(file + " line " + (i + 1)
                        + ": needs positive integers prompt_len and output_len");
            }
            r.add(new Request(p, o, 0));
        }
        if (r.isEmpty()) {
            throw new IllegalArgumentException(file + ": no requests");
        }
        return new ServingLoad(file.getFileName().toString(), r);
    }

    /** The same requests arriving as a Poisson process of {@code rate} per second (seeded). */
    ServingLoad poisson(double rate, long seed) {
        Random rnd = new Random(seed);
        List<Request> r = new ArrayList<>();
        double t = 0;
        for (Request q : requests) {
            r.add(new Request(q.promptLen(), q.outputLen(), t));
            t += -Math.log(1 - rnd.nextDouble()) / rate;
        }
        return new ServingLoad(name, r);
    }

    /** The first {@code n} requests. */
    ServingLoad first(int n) {
        return new ServingLoad(name, requests.subList(0, Math.min(n, requests.size())));
    }

    /**
     * The LoRA adapter of request {@code index} spread round-robin over {@code adapters} adapters named as
     * {@link ModelSource#randomAdapters} names them ({@code random-1} ...); null (the base model) when there are none.
     */
    static String adapter(int index, int adapters) {
        return adapters == 0 ? null : "random-" + (index % adapters + 1);
    }

    /** Random ids above the special ones at the start of the vocabulary, the same for the same index. */
    static int[] prompt(int index, int length, int vocabSize) {
        Random rnd = new Random(1_000_003L * index + length);
        int[] ids = new int[length];
        for (int i = 0; i < length; i++) {
            ids[i] = 3 + rnd.nextInt(vocabSize - 3);
        }
        return ids;
    }
}
