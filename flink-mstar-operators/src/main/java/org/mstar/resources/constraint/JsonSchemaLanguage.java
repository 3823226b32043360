package org.mstar.resources.constraint;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dk.brics.automaton.Automaton;
import dk.brics.automaton.BasicAutomata;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.mstar.resources.RequestValidationException;

/**
 * The JSON texts a schema accepts, as a regular language over UTF-16 code units, in a fixed compact form.
 *
 * <p><b>Whitespace policy: none.</b> Outputs are compact JSON ({@code {"a":1,"b":[true,null]}}), with no
 * whitespace between tokens, so the model spends no tokens on layout and a value cannot go on forever as
 * blank space.
 *
 * <p>Supported keywords: {@code type} (object, string, number, integer, boolean, null, array, or a list of them),
 * {@code properties}, {@code required}, {@code additionalProperties}, {@code enum}, {@code const}, {@code items},
 * {@code minItems}/{@code maxItems}, {@code minLength}/{@code maxLength}, {@code anyOf}, and annotations
 * ({@code title}, {@code description}, {@code $schema}, ...) which are ignored. Any other keyword is refused with a
 * 400 naming it, so an output that matches the language always validates against the schema.
 *
 * <p>How each form is generated:
 * <ul>
 *   <li>objects: the declared properties in the declared order, each required one present, each optional one
 *       present or left out; no other properties, whatever {@code additionalProperties} says (an object with only
 *       declared properties validates under any setting);</li>
 *   <li>strings: any code point but {@code "}, {@code \} and the controls below U+0020, or an escape
 *       ({@code \" \\ \/ \b \f \n \r \t}, or {@code \\uXXXX} outside the surrogates), each counting as one
 *       character for the length bounds;</li>
 *   <li>integers: an optional minus, then {@code 0} or up to {@value #MAX_DIGITS} digits without a leading zero;
 *       numbers: that, an optional fraction of up to {@value #MAX_DIGITS} digits and an optional exponent of up to
 *       3 digits (bounded so that a number cannot run on forever);</li>
 *   <li>enum and const: the compact JSON text of each value.</li>
 * </ul>
 */
final class JsonSchemaLanguage {
    static final int MAX_DIGITS = 15;
    /** Largest minLength/maxLength and minItems/maxItems taken: each unit of a bound is a copy in the automaton. */
    static final int MAX_BOUND = 4096;
    private static final String FIELD = OutputConstraint.Kind.JSON_SCHEMA.field();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Set<String> ANNOTATIONS = Set.of("title", "description", "$schema", "$id", "$comment",
            "default", "examples", "deprecated", "readOnly", "writeOnly");
    private static final List<String> TYPES = List.of("object", "string", "number", "integer", "boolean", "null",
            "array");

    private JsonSchemaLanguage() {}

    /**
     * @throws RequestValidationException naming what is wrong: text that is not JSON, or an unsupported keyword or
     *     value (with its path in the schema)
     */
    static Automaton of(String schemaText) {
        JsonNode schema;
        try {
            schema = JSON.readTree(schemaText);
        } catch (JsonProcessingException e) {
            throw new RequestValidationException(FIELD, "not valid JSON: " + e.getOriginalMessage());
        }
        if (schema == null || schema.isMissingNode()) {
            throw new RequestValidationException(FIELD, "empty schema");
        }
        Automaton a = value(schema, "#");
        if (a.isEmpty()) {
            throw new RequestValidationException(FIELD, "the schema accepts no value");
        }
        return a;
    }

    private static Automaton value(JsonNode s, String path) {
        if (!s.isObject()) {
            throw invalid(path, "a schema must be a JSON object, got " + s);
        }
        checkKeywords(s, path);
        if (s.has("const")) {
            return literal(s.get("const"));
        }
        if (s.has("enum")) {
            JsonNode values = s.get("enum");
            if (!values.isArray() || values.isEmpty()) {
                throw invalid(path + "/enum", "must be a non-empty array");
            }
            List<Automaton> options = new ArrayList<>();
            values.forEach(v -> options.add(literal(v)));
            return Automaton.union(options);
        }
        if (s.has("anyOf")) {
            JsonNode options = s.get("anyOf");
            if (!options.isArray() || options.isEmpty()) {
                throw invalid(path + "/anyOf", "must be a non-empty array");
            }
            List<Automaton> parts = new ArrayList<>();
            for (int i = 0; i < options.size(); i++) {
                parts.add(value(options.get(i), path + "/anyOf/" + i));
            }
            return Automaton.union(parts);
        }
        JsonNode type = s.get("type");
        if (type == null) {
            if (s.has("properties")) {
                return object(s, path);
            }
            throw invalid(path, "needs a type (or enum, const, anyOf, properties)");
        }
        if (type.isArray()) {
            List<Automaton> parts = new ArrayList<>();
            type.forEach(t -> parts.add(typed(typeName(t, path), s, path)));
            if (parts.isEmpty()) {
                throw invalid(path + "/type", "must name at least one type");
            }
            return Automaton.union(parts);
        }
        return typed(typeName(type, path), s, path);
    }

    private static String typeName(JsonNode t, String path) {
        if (!t.isTextual() || !TYPES.contains(t.asText())) {
            throw invalid(path + "/type", "unsupported type " + t + "; supported: " + String.join(", ", TYPES));
        }
        return t.asText();
    }

    /**
     * Integers in {@code [minimum, maximum]} (either may be absent: then the usual digit bound applies on that
     * side), without leading zeros: brics's decimal comparisons intersected with the canonical form.
     */
    private static Automaton integerRange(JsonNode s, String path) {
        long limit = (long) Math.pow(10, MAX_DIGITS) - 1;
        long lo = longBound(s, "minimum", -limit, path);
        long hi = longBound(s, "maximum", limit, path);
        if (lo > hi) {
            throw invalid(path, "minimum " + lo + " is above maximum " + hi);
        }
        Automaton canonical = BasicAutomata.makeChar('0').union(BasicAutomata.makeCharRange('1', '9')
                .concatenate(BasicAutomata.makeCharRange('0', '9').repeat()));
        List<Automaton> parts = new ArrayList<>();
        if (hi >= 0) {
            parts.add(magnitudes(Math.max(lo, 0), hi).intersection(canonical));
        }
        if (lo < 0) {
            Automaton negative = magnitudes(Math.max(-hi, 1), -lo).intersection(canonical);
            parts.add(BasicAutomata.makeChar('-').concatenate(negative));
        }
        return Automaton.union(parts);
    }

    /** Decimal strings of the non-negative integers in {@code [lo, hi]} (leading zeros possibly among them). */
    private static Automaton magnitudes(long lo, long hi) {
        return BasicAutomata.makeMinInteger(Long.toString(lo)).intersection(BasicAutomata.makeMaxInteger(Long.toString(hi)));
    }

    private static long longBound(JsonNode s, String keyword, long absent, String path) {
        JsonNode v = s.get(keyword);
        if (v == null) {
            return absent;
        }
        if (!v.isIntegralNumber() || !v.canConvertToLong() || Math.abs(v.asLong()) > 999_999_999_999_999_999L) {
            throw invalid(path + "/" + keyword, "must be an integer of at most 18 digits, got " + v);
        }
        return v.asLong();
    }

    private static Automaton typed(String type, JsonNode s, String path) {
        return switch (type) {
            case "object" -> object(s, path);
            case "array" -> array(s, path);
            case "string" -> string(s, path);
            case "integer" -> s.has("minimum") || s.has("maximum") ? integerRange(s, path) : integer();
            case "number" -> {
                if (s.has("minimum") || s.has("maximum")) {
                    throw invalid(path, "minimum and maximum are supported for integers only");
                }
                yield number();
            }
            case "boolean" -> BasicAutomata.makeString("true").union(BasicAutomata.makeString("false"));
            default -> BasicAutomata.makeString("null");
        };
    }

    /** The keywords that shape the output, in the order the refusal lists them (the docs' order). */
    private static final List<String> KEYWORDS = List.of("type", "properties", "required", "additionalProperties",
            "enum", "const", "items", "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "anyOf");

    private static void checkKeywords(JsonNode s, String path) {
        for (Iterator<String> it = s.fieldNames(); it.hasNext(); ) {
            String k = it.next();
            if (!KEYWORDS.contains(k) && !ANNOTATIONS.contains(k)) {
                throw invalid(path, "keyword '" + k + "' is not supported; supported: " + String.join(", ", KEYWORDS));
            }
        }
    }

    private static Automaton object(JsonNode s, String path) {
        JsonNode props = s.path("properties");
        if (!props.isMissingNode() && !props.isObject()) {
            throw invalid(path + "/properties", "must be an object");
        }
        Set<String> required = new java.util.HashSet<>();
        s.path("required").forEach(r -> required.add(r.asText()));
        List<Automaton> entries = new ArrayList<>();
        List<Boolean> optional = new ArrayList<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = props.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> p = it.next();
            Automaton key = BasicAutomata.makeString(jsonText(JSON.getNodeFactory().textNode(p.getKey())) + ":");
            entries.add(key.concatenate(value(p.getValue(), path + "/properties/" + p.getKey())));
            optional.add(!required.remove(p.getKey()));
        }
        if (!required.isEmpty()) {
            throw invalid(path + "/required", "names properties that are not declared: " + required);
        }
        return BasicAutomata.makeChar('{').concatenate(members(entries, optional)).concatenate(BasicAutomata.makeChar('}'));
    }

    /**
     * Every sequence of {@code entries} in order, each optional one present or not, the present ones joined by
     * commas. Built from the back: {@code first[i]} is what may follow when nothing was written yet, {@code
     * later[i]} when something was (so the next entry needs a comma).
     */
    private static Automaton members(List<Automaton> entries, List<Boolean> optional) {
        Automaton first = BasicAutomata.makeEmptyString();
        Automaton later = BasicAutomata.makeEmptyString();
        for (int i = entries.size() - 1; i >= 0; i--) {
            Automaton e = entries.get(i);
            Automaton newFirst = e.concatenate(later);
            Automaton newLater = BasicAutomata.makeChar(',').concatenate(e).concatenate(later);
            if (optional.get(i)) {
                newFirst = newFirst.union(first);
                newLater = newLater.union(later);
            }
            first = newFirst;
            later = newLater;
        }
        return first;
    }

    private static Automaton array(JsonNode s, String path) {
        if (!s.has("items") || !s.get("items").isObject()) {
            throw invalid(path, "an array needs an items schema");
        }
        int min = bound(s, "minItems", 0, path);
        int max = bound(s, "maxItems", -1, path);
        if (max >= 0 && max < min) {
            throw invalid(path, "maxItems " + max + " is below minItems " + min);
        }
        Automaton item = value(s.get("items"), path + "/items");
        Automaton open = BasicAutomata.makeChar('[');
        Automaton close = BasicAutomata.makeChar(']');
        if (max == 0) {
            return open.concatenate(close);
        }
        Automaton more = BasicAutomata.makeChar(',').concatenate(item);
        Automaton tail = repeat(more, Math.max(0, min - 1), max < 0 ? -1 : max - 1, path);
        Automaton some = open.concatenate(item).concatenate(tail).concatenate(close);
        return min == 0 ? some.union(open.concatenate(close)) : some;
    }

    private static Automaton string(JsonNode s, String path) {
        int min = bound(s, "minLength", 0, path);
        int max = bound(s, "maxLength", -1, path);
        if (max >= 0 && max < min) {
            throw invalid(path, "maxLength " + max + " is below minLength " + min);
        }
        Automaton plain = CodePointSets.except(List.of(new char[] {0, 0x1F}, new char[] {'"', '"'},
                new char[] {'\\', '\\'}));
        Automaton simpleEscape = BasicAutomata.makeChar('\\').concatenate(BasicAutomata.makeCharSet("\"\\/bfnrt"));
        Automaton hex = BasicAutomata.makeCharSet("0123456789abcdefABCDEF");
        // \\uXXXX outside D800-DFFF: a lone surrogate escape would not decode to a character
        Automaton notSurrogate = BasicAutomata.makeCharSet("0123456789abcefABCEF").concatenate(hex.repeat(3, 3))
                .union(BasicAutomata.makeCharSet("dD").concatenate(BasicAutomata.makeCharRange('0', '7'))
                        .concatenate(hex.repeat(2, 2)));
        Automaton unicodeEscape = BasicAutomata.makeString("\\u").concatenate(notSurrogate);
        Automaton character = Automaton.union(List.of(plain, simpleEscape, unicodeEscape));
        Automaton body = repeat(character, min, max, path);
        Automaton quote = BasicAutomata.makeChar('"');
        return quote.concatenate(body).concatenate(quote);
    }

    /**
     * {@code a} repeated {@code min} to {@code max} times ({@code max} -1: unbounded), refused up front when the
     * copies alone would exceed the state budget.
     */
    static Automaton repeat(Automaton a, int min, int max, String path) {
        long copies = Math.max(1, Math.max(min, max));
        if (copies * a.getNumberOfStates() > ConstraintCompiler.MAX_STATES) {
            throw invalid(path, "repeating a part of " + a.getNumberOfStates() + " states " + copies
                    + " times exceeds the " + ConstraintCompiler.MAX_STATES + " automaton states a constraint may use");
        }
        return max < 0 ? a.repeat(min) : a.repeat(min, max);
    }

    private static Automaton integer() {
        Automaton digits = BasicAutomata.makeCharRange('1', '9')
                .concatenate(BasicAutomata.makeCharRange('0', '9').repeat(0, MAX_DIGITS - 1));
        return BasicAutomata.makeChar('-').optional().concatenate(BasicAutomata.makeChar('0').union(digits));
    }

    private static Automaton number() {
        Automaton digit = BasicAutomata.makeCharRange('0', '9');
        Automaton fraction = BasicAutomata.makeChar('.').concatenate(digit.repeat(1, MAX_DIGITS));
        Automaton exponent = BasicAutomata.makeCharSet("eE").concatenate(BasicAutomata.makeCharSet("+-").optional())
                .concatenate(digit.repeat(1, 3));
        return integer().concatenate(fraction.optional()).concatenate(exponent.optional());
    }

    private static Automaton literal(JsonNode v) {
        return BasicAutomata.makeString(jsonText(v));
    }

    private static String jsonText(JsonNode v) {
        try {
            return JSON.writeValueAsString(v);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a parsed JSON value writes back", e);
        }
    }

    private static int bound(JsonNode s, String keyword, int absent, String path) {
        JsonNode v = s.get(keyword);
        if (v == null) {
            return absent;
        }
        if (!v.canConvertToInt() || !v.isIntegralNumber() || v.asInt() < 0 || v.asInt() > MAX_BOUND) {
            throw invalid(path + "/" + keyword, "must be an integer in [0, " + MAX_BOUND + "], got " + v);
        }
        return v.asInt();
    }

    private static RequestValidationException invalid(String path, String message) {
        return new RequestValidationException(FIELD, "at " + path + ": " + message);
    }
}
