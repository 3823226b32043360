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
    void typesWithoutACounterpartAreRefusedByPath() {
        org.apache.avro.Schema withMap = new org.apache.avro.Schema.Parser().parse("""
                {"type":"record","name":"M","fields":[{"name":"attrs","type":{"type":"map","values":"string"}}]}""");
        assertThatThrownBy(() -> AvroJsonSchema.of(withMap)).hasMessageContaining("M.attrs").hasMessageContaining("map");
    }
}
