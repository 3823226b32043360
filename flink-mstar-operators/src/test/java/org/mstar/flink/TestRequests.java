package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.apache.flink.configuration.Configuration;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.TokenOutput;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.GenerateResult;
import org.mstar.schemas.Response;
import org.mstar.schemas.TokenEvent;

/** Requests for tests, their expected outputs, and checks of response streams. */
public final class TestRequests {
    private static final RequestConverter CONVERTER = GenerateSettings.from(new Configuration()).converter();

    private TestRequests() {}

    public static RequestConverter converter() {
        return CONVERTER;
    }

    /** A sampled request with a text prompt; its length differs by {@code i} so outputs differ in length. */
    public static GenerateRequest request(String id, int i) {
        return GenerateRequest.newBuilder()
                .setRequestId(id)
                .setPrompt("tell me about item " + i)
                .setMaxTokens(8 + (i * 7) % 25)
                .setTemperature(0.8)
                .setIgnoreEos(i % 3 != 0)
                .setMetadata(Map.of("n", Integer.toString(i)))
                .build();
    }

    public static List<GenerateRequest> requests(String prefix, int count) {
        List<GenerateRequest> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(request(prefix + "-" + i, i));
        }
        return out;
    }

    /** Token ids a complete, uninterrupted run of {@link FakeEngine} produces for each request. */
    public static Map<String, List<Integer>> fakeReference(List<GenerateRequest> requests) {
        Map<String, List<Integer>> out = new LinkedHashMap<>();
        for (GenerateRequest r : requests) {
            out.put(r.getRequestId(), FakeEngine.reference(CONVERTER.convert(r), FakeEngineFactory.CONTEXT_LENGTH)
                    .stream().map(TokenOutput::tokenId).toList());
        }
        return out;
    }

    /** Token ids {@code engine} generates for each request when it serves them all, uninterrupted. */
    public static Map<String, List<Integer>> reference(List<GenerateRequest> requests, GenerationEngine engine) {
        return UninterruptedRun.tokens(requests, engine, new Configuration());
    }

    /** What a consumer collected for each request, in arrival order. */
    public static final class Collected {
        public final Map<String, List<TokenEvent>> tokens = new LinkedHashMap<>();
        public final Map<String, List<GenerateResult>> results = new LinkedHashMap<>();
        public final List<ErrorEvent> errors = new ArrayList<>();

        public void add(Response response) {
            Object event = response.getEvent();
            if (event instanceof TokenEvent t) {
                tokens.computeIfAbsent(t.getRequestId(), k -> new ArrayList<>()).add(t);
            } else if (event instanceof GenerateResult r) {
                results.computeIfAbsent(r.getRequestId(), k -> new ArrayList<>()).add(r);
            } else {
                errors.add((ErrorEvent) event);
            }
        }

        public void addAll(Iterable<Response> responses) {
            responses.forEach(this::add);
        }

        public int tokenCount() {
            return tokens.values().stream().mapToInt(List::size).sum();
        }

        public int resultCount() {
            return results.values().stream().mapToInt(List::size).sum();
        }

        /** {@link #assertComplete(List, Map)} against {@link FakeEngine}'s outputs. */
        public void assertComplete(List<GenerateRequest> requests) {
            assertComplete(requests, fakeReference(requests));
        }

        /**
         * Checks that each request produced exactly its expected tokens once, in index order, then exactly one
         * result holding the same ids and its metadata.
         */
        public void assertComplete(List<GenerateRequest> requests, Map<String, List<Integer>> expectedTokens) {
            for (GenerateRequest request : requests) {
                String id = request.getRequestId();
                List<Integer> expected = expectedTokens.get(id);
                List<TokenEvent> events = tokens.getOrDefault(id, List.of());
                List<Integer> indexes = events.stream().map(TokenEvent::getIndex).toList();
                List<Integer> expectedIndexes = IntStream.range(0, expected.size()).boxed().toList();
                assertThat(indexes).as("token indexes of %s", id).isEqualTo(expectedIndexes);
                assertThat(events.stream().map(TokenEvent::getTokenId).toList())
                        .as("token ids of %s", id).isEqualTo(expected);
                assertThat(events.get(events.size() - 1).getFinishReason())
                        .as("finish reason on the last token of %s", id).isNotNull();
                List<GenerateResult> rs = results.getOrDefault(id, List.of());
                assertThat(rs).as("results of %s", id).hasSize(1);
                assertThat(rs.get(0).getTokenIds()).isEqualTo(expected);
                assertThat(rs.get(0).getMetadata()).isEqualTo(request.getMetadata());
            }
        }
    }
}
