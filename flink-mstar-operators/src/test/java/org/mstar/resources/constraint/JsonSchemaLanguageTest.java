package org.mstar.resources.constraint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mstar.resources.RequestValidationException;

/** Strings of a schema's language parse as JSON and validate against the schema (checked by an independent validator). */
class JsonSchemaLanguageTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final SchemaRegistry SCHEMAS = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);

    @ParameterizedTest
    @ValueSource(strings = {
            "{\"type\":\"string\"}",
            "{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}",
            "{\"type\":\"integer\"}",
            "{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}",
            "{\"type\":\"integer\",\"minimum\":100}",
            "{\"type\":\"integer\",\"minimum\":-2147483648,\"maximum\":2147483647}",
            "{\"type\":\"number\"}",
            "{\"type\":[\"boolean\",\"null\"]}",
            "{\"enum\":[\"red\",\"green\",1.5,null,{\"a\":[1]}]}",
            "{\"const\":\"only\"}",
            "{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
            "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2}}",
            "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                    + "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"name\"],"
                    + "\"additionalProperties\":false}",
            "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"null\"}},"
                    + "\"required\":[\"b\"]},\"c\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}}}",
            "{\"type\":\"object\"}",
            "{\"title\":\"t\",\"description\":\"d\",\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"boolean\"}},"
                    + "\"required\":[\"x\"]}"})
    void everyStringOfTheLanguageValidates(String schemaText) throws Exception {
        ByteDfa dfa = ByteDfa.fromUtf16(JsonSchemaLanguage.of(schemaText), 50_000);
        Schema schema = SCHEMAS.getSchema(schemaText);
        DfaWalks walks = new DfaWalks(dfa);
        Random rnd = new Random(schemaText.hashCode());
        for (int i = 0; i < 300; i++) {
            String text = new String(walks.walk(rnd, 40), StandardCharsets.UTF_8);
            JsonNode value = JSON.readTree(text);
            assertThat(schema.validate(value)).as("%s against %s", text, schemaText).isEmpty();
        }
    }

    @org.junit.jupiter.api.Test
    void integerBoundsAreExact() {
        ByteDfa dfa = ByteDfa.fromUtf16(JsonSchemaLanguage.of("{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}"),
                1000);
        DfaWalks walks = new DfaWalks(dfa);
        for (int v = -200; v <= 200; v++) {
            assertThat(walks.accepts(Integer.toString(v).getBytes(StandardCharsets.UTF_8))).as("%d", v)
                    .isEqualTo(v >= -5 && v <= 120);
        }
        for (String text : new String[] {"007", "-0", "+5", "1.0", "", "-"}) {
            assertThat(walks.accepts(text.getBytes(StandardCharsets.UTF_8))).as(text).isFalse();
        }
    }

    @org.junit.jupiter.api.Test
    void refusesSchemasWhoseAutomatonIsTooLarge() {
        String wide = "{\"type\":\"array\",\"maxItems\":4000,\"items\":{\"type\":\"string\",\"maxLength\":4000}}";
        assertThatThrownBy(() -> ConstraintCompiler.compile(OutputConstraint.jsonSchema(wide),
                TestVocabularies.bytesAnd(java.util.List.of(), 1)))
                .isInstanceOf(RequestValidationException.class).hasMessageContaining("automaton states");
        // small parts, but the byte automaton of the whole is over the budget
        String deep = "{\"type\":\"array\",\"maxItems\":300,\"items\":{\"type\":\"string\",\"maxLength\":60}}";
        assertThatThrownBy(() -> ConstraintCompiler.compile(OutputConstraint.jsonSchema(deep),
                TestVocabularies.bytesAnd(java.util.List.of(), 1)))
                .isInstanceOf(RequestValidationException.class).hasMessageContaining("automaton states");
    }

    @ParameterizedTest
    @ValueSource(strings = {
            "{\"type\":\"string\",\"pattern\":\"a+\"}", "{\"type\":\"number\",\"minimum\":3}",
            "{\"type\":\"integer\",\"minimum\":3,\"maximum\":2}",
            "{\"$ref\":\"#/defs/x\"}", "{\"type\":\"date\"}", "{\"oneOf\":[{\"type\":\"null\"}]}",
            "{\"type\":\"array\"}", "{\"type\":\"object\",\"required\":[\"x\"]}", "not json", "[1]",
            "{\"type\":\"string\",\"maxLength\":-1}", "{\"type\":\"string\",\"maxLength\":100000}"})
    void refusesWhatItCannotGuarantee(String schemaText) {
        assertThatThrownBy(() -> JsonSchemaLanguage.of(schemaText)).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith("json_schema: ");
    }
}
