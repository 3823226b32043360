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

    @ParameterizedTest
    @ValueSource(strings = {
            "{\"type\":\"string\",\"pattern\":\"a+\"}", "{\"type\":\"integer\",\"minimum\":3}",
            "{\"$ref\":\"#/defs/x\"}", "{\"type\":\"date\"}", "{\"oneOf\":[{\"type\":\"null\"}]}",
            "{\"type\":\"array\"}", "{\"type\":\"object\",\"required\":[\"x\"]}", "not json", "[1]",
            "{\"type\":\"string\",\"maxLength\":-1}"})
    void refusesWhatItCannotGuarantee(String schemaText) {
        assertThatThrownBy(() -> JsonSchemaLanguage.of(schemaText)).isInstanceOf(RequestValidationException.class)
                .hasMessageStartingWith("json_schema: ");
    }
}
