package org.mstar.flink;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.avro.Schema;

/**
 * The JSON schema of an Avro schema's values written as plain JSON, so a pipeline's output record type can
 * constrain generation ({@code json_schema} of a request): the model then writes one JSON object per event that a
 * JSON-to-Avro step turns into the record.
 *
 * <p>Mapping: a record is an object with every field required, in field order, and no other properties; string,
 * boolean and null map to themselves, int and long to integer, float and double to number, an enum to its symbols,
 * an array to an array of its items; a union is {@code anyOf} its branches (a nullable field may be null). Values are
 * plain JSON, not Avro's JSON encoding (which wraps union values in an object naming the branch). Logical types
 * use their underlying type. Maps, bytes, fixed and recursive records have no counterpart in the supported JSON
 * schema subset and are refused.
 */
public final class AvroJsonSchema {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private AvroJsonSchema() {}

    /**
     * @throws IllegalArgumentException naming the field path of a type that cannot be expressed
     */
    public static ObjectNode of(Schema schema) {
        return convert(schema, schema.getFullName(), new HashSet<>());
    }

    private static ObjectNode convert(Schema s, String path, Set<String> enclosing) {
        return switch (s.getType()) {
            case RECORD -> record(s, path, enclosing);
            case STRING -> typed("string");
            case BOOLEAN -> typed("boolean");
            case NULL -> typed("null");
            case INT, LONG -> typed("integer");
            case FLOAT, DOUBLE -> typed("number");
            case ENUM -> {
                ObjectNode e = NODES.objectNode();
                ArrayNode symbols = e.putArray("enum");
                s.getEnumSymbols().forEach(symbols::add);
                yield e;
            }
            case ARRAY -> {
                ObjectNode a = typed("array");
                a.set("items", convert(s.getElementType(), path + "[]", enclosing));
                yield a;
            }
            case UNION -> {
                List<ObjectNode> branches = new ArrayList<>();
                for (Schema branch : s.getTypes()) {
                    branches.add(convert(branch, path, enclosing));
                }
                if (branches.size() == 1) {
                    yield branches.get(0);
                }
                ObjectNode u = NODES.objectNode();
                u.putArray("anyOf").addAll(branches);
                yield u;
            }
            default -> throw new IllegalArgumentException("Avro type " + s.getType().getName() + " at " + path
                    + " has no JSON schema counterpart in the structured-output subset");
        };
    }

    private static ObjectNode record(Schema s, String path, Set<String> enclosing) {
        if (!enclosing.add(s.getFullName())) {
            throw new IllegalArgumentException("record " + s.getFullName() + " at " + path
                    + " contains itself; recursive records cannot be generated");
        }
        ObjectNode o = typed("object");
        ObjectNode props = o.putObject("properties");
        ArrayNode required = o.putArray("required");
        for (Schema.Field f : s.getFields()) {
            props.set(f.name(), convert(f.schema(), path + "." + f.name(), enclosing));
            required.add(f.name());
        }
        o.put("additionalProperties", false);
        enclosing.remove(s.getFullName());
        return o;
    }

    private static ObjectNode typed(String type) {
        return NODES.objectNode().put("type", type);
    }
}
