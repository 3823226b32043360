package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.resources.constraint.OutputConstraint;

/**
 * Random schemas from the supported subset (objects, nested objects, arrays, strings, numbers, integers, booleans,
 * null, enum, const, required and optional properties), served by the tiny random model sampling at temperature 1:
 * every output parses as JSON, validates against its schema (an independent validator judges), and ends because
 * the schema was satisfied, not because tokens ran out.
 */
class StructuredOutputPropertiesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final SchemaRegistry SCHEMAS = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
    private static final List<String> NAMES = List.of("id", "name", "tags", "score", "ok", "note", "é", "a b");

    private static Path dir;
    private static CpuDevice cpu;
    private static LlamaEngine engine;
    private static int requests;

    @BeforeContainer
    static void load() throws Exception {
        dir = Files.createTempDirectory("mstar-structured");
        cpu = new CpuDevice(2);
        engine = StructuredOutputModel.engine(StructuredOutputModel.write(dir, 11), cpu, 1);
    }

    @AfterContainer
    static void close() throws Exception {
        engine.close();
        cpu.close();
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    @Property(tries = 40, seed = "15")
    void outputParsesAndValidates(@ForAll("schemas") ObjectNode schema, @ForAll long seed) throws Exception {
        String schemaText = JSON.writeValueAsString(schema);
        String id = "r" + requests++;
        engine.submit(StructuredOutputModel.request(id, "Extract a record:", 1.0, seed, 1500,
                OutputConstraint.jsonSchema(schemaText)));
        EngineDriver driver = new EngineDriver();
        driver.drain(engine, 2000);
        assertThat(driver.failures).isEmpty();
        FinishedRequest done = driver.finished.get(id);
        assertThat(done.finish()).as("%s gave %s", schemaText, done.text()).isEqualTo(FinishReason.STOP);
        JsonNode value = JSON.readTree(done.text());
        assertThat(SCHEMAS.getSchema(schemaText).validate(value)).as("%s against %s", done.text(), schemaText).isEmpty();
    }

    @Provide
    Arbitrary<ObjectNode> schemas() {
        return object(2);
    }

    private Arbitrary<ObjectNode> schema(int depth) {
        if (depth == 0) {
            return scalar();
        }
        return Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(3, scalar()),
                net.jqwik.api.Tuple.of(1, object(depth - 1)),
                net.jqwik.api.Tuple.of(1, array(depth - 1)));
    }

    private Arbitrary<ObjectNode> object(int depth) {
        Arbitrary<List<String>> names = Arbitraries.of(NAMES).list().ofMinSize(1).ofMaxSize(3).uniqueElements();
        return names.flatMap(ns -> Combinators.combine(schema(depth).list().ofSize(ns.size()),
                        Arbitraries.of(true, false).list().ofSize(ns.size()), Arbitraries.of(true, false))
                .as((props, required, closed) -> {
                    ObjectNode o = NODES.objectNode().put("type", "object");
                    ObjectNode p = o.putObject("properties");
                    ArrayNode req = NODES.arrayNode();
                    for (int i = 0; i < ns.size(); i++) {
                        p.set(ns.get(i), props.get(i));
                        if (required.get(i)) {
                            req.add(ns.get(i));
                        }
                    }
                    o.set("required", req);
                    if (closed) {
                        o.put("additionalProperties", false);
                    }
                    return o;
                }));
    }

    private Arbitrary<ObjectNode> array(int depth) {
        return Combinators.combine(schema(depth), Arbitraries.integers().between(0, 1), Arbitraries.integers().between(1, 3))
                .as((items, min, max) -> {
                    ObjectNode a = NODES.objectNode().put("type", "array");
                    a.set("items", items);
                    return a.put("minItems", min).put("maxItems", max);
                });
    }

    private Arbitrary<ObjectNode> scalar() {
        Arbitrary<ObjectNode> string = Combinators.combine(Arbitraries.integers().between(0, 2),
                Arbitraries.integers().between(2, 6)).as((min, max) -> NODES.objectNode().put("type", "string")
                .put("minLength", min).put("maxLength", max));
        Arbitrary<ObjectNode> typed = Arbitraries.of("integer", "number", "boolean", "null")
                .map(t -> NODES.objectNode().put("type", t));
        Arbitrary<ObjectNode> enums = Arbitraries.of("red", "green", "blue", "1", "é€", "x\"y").list().ofMinSize(1)
                .ofMaxSize(3).uniqueElements().map(vs -> {
                    ObjectNode e = NODES.objectNode();
                    ArrayNode values = e.putArray("enum");
                    vs.forEach(values::add);
                    values.add(7);
                    return e;
                });
        Arbitrary<ObjectNode> constant = Arbitraries.of("yes", "no").map(v -> NODES.objectNode().put("const", v));
        return Arbitraries.oneOf(string, typed, enums, constant);
    }
}
