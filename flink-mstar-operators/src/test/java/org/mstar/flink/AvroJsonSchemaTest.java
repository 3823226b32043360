package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import org.junit.jupiter.api.Test;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.schemas.ErrorEvent;

class AvroJsonSchemaTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final org.apache.avro.Schema EVENT = new org.apache.avro.Schema.Parser().parse("""
            {"type":"record","name":"Extracted","fields":[
              {"name":"city","type":"string"},
              {"name":"population","type":"long"},
              {"name":"area","type":["null","double"]},
              {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CITY","TOWN"]}},
              {"name":"tags","type":{"type":"array","items":"string"}},
              {"name":"mayor","type":{"type":"record","name":"Person","fields":[{"name":"name","type":"string"}]}}]}""");

    @Test
    void aRecordBecomesAClosedObjectWithEveryFieldRequired() throws Exception {
        JsonNode schema = AvroJsonSchema.of(EVENT);
        Schema validator = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12).getSchema(schema.toString());
        assertThat(validator.validate(JSON.readTree("""
                {"city":"Paris","population":2100000,"area":null,"kind":"CITY","tags":[],"mayor":{"name":"A"}}"""))).isEmpty();
        assertThat(validator.validate(JSON.readTree("""
                {"city":"Paris","population":2.5,"area":1,"kind":"VILLAGE","tags":[1],"mayor":{}}"""))).hasSize(4);
        assertThat(schema.get("required")).hasSize(6);
        assertThat(schema.get("additionalProperties").asBoolean(true)).isFalse();
    }

    @Test
    void theConversionIsInTheSupportedSubset() {
        // compiles as a constraint: every keyword it writes is one structured output supports
        org.mstar.resources.constraint.TokenVocabulary bytes = new org.mstar.resources.constraint.TokenVocabulary(
                java.util.stream.IntStream.range(0, 257).mapToObj(i -> i == 256 ? null : new byte[] {(byte) i})
                        .toArray(byte[][]::new), java.util.List.of(256));
        assertThat(org.mstar.resources.constraint.ConstraintCompiler.compile(
                OutputConstraint.jsonSchema(AvroJsonSchema.of(EVENT).toString()), bytes).states()).isPositive();
        assertThat(org.mstar.resources.constraint.ConstraintCompiler.compile(
                OutputConstraint.jsonSchema(AvroJsonSchema.of(ErrorEvent.getClassSchema()).toString()), bytes).states())
                .isPositive();
    }

    @Test
    void outputsOfAUnionFreeRecordDecodeWithAvrosJsonDecoder() throws Exception {
        org.apache.avro.Schema city = new org.apache.avro.Schema.Parser().parse("""
                {"type":"record","name":"City","fields":[{"name":"name","type":"string"},{"name":"people","type":"long"},
                 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["CITY","TOWN"]}},
                 {"name":"zips","type":{"type":"array","items":"int"}}]}""");
        org.mstar.resources.constraint.TokenVocabulary bytes = new org.mstar.resources.constraint.TokenVocabulary(
                java.util.stream.IntStream.range(0, 257).mapToObj(i -> i == 256 ? null : new byte[] {(byte) i})
                        .toArray(byte[][]::new), java.util.List.of(256));
        org.mstar.resources.constraint.TokenAutomaton a = org.mstar.resources.constraint.ConstraintCompiler.compile(
                OutputConstraint.jsonSchema(AvroJsonSchema.of(city).toString()), bytes);
        java.util.Random rnd = new java.util.Random(5);
        for (int n = 0; n < 50; n++) {
            java.io.ByteArrayOutputStream text = new java.io.ByteArrayOutputStream();
            int s = a.start();
            while (a.continues(s) && !(a.accepting(s) && rnd.nextBoolean())) {
                // ASCII bytes only, biased towards ending strings and numbers soon
                java.util.List<Integer> options = new java.util.ArrayList<>();
                int[] mask = a.mask(s);
                for (int b = 0; b < 128; b++) {
                    if ((mask[b >>> 5] >>> (b & 31) & 1) != 0) {
                        options.add(b);
                    }
                }
                int pick = options.contains((int) '"') && rnd.nextInt(3) == 0 ? '"'
                        : options.get(rnd.nextInt(options.size()));
                text.write(pick);
                s = a.next(s, pick);
            }
            String json = text.toString(java.nio.charset.StandardCharsets.UTF_8);
            org.apache.avro.generic.GenericRecord record = new org.apache.avro.generic.GenericDatumReader<
                    org.apache.avro.generic.GenericRecord>(city).read(null,
                    org.apache.avro.io.DecoderFactory.get().jsonDecoder(city, json));
            assertThat(record.get("name").toString()).as(json).isEqualTo(JSON.readTree(json).get("name").asText());
        }
    }

    @Test
    void typesWithoutACounterpartAreRefusedByPath() {
        org.apache.avro.Schema withMap = new org.apache.avro.Schema.Parser().parse("""
                {"type":"record","name":"M","fields":[{"name":"attrs","type":{"type":"map","values":"string"}}]}""");
        assertThatThrownBy(() -> AvroJsonSchema.of(withMap)).hasMessageContaining("M.attrs").hasMessageContaining("map");
    }
}
