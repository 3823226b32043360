package org.mstar.resources.constraint;

import java.util.List;
import java.util.Objects;

/**
 * What a request's output must match, as the client gave it: a JSON schema (its text), a regular expression
 * (Java syntax, matched against the whole output) or a list of choices (the output is exactly one of them).
 * A value: two equal constraints compile to the same automaton, which is how {@link ConstraintCache} shares them.
 *
 * @param kind  which of the three
 * @param text  the schema or the expression; null for a choice list
 * @param choices the choices; empty unless {@code kind} is {@link Kind#CHOICE}
 */
public record OutputConstraint(Kind kind, String text, List<String> choices) {

    /** The three kinds, each with the request field that names it in an error. */
    public enum Kind {
        JSON_SCHEMA("json_schema"), REGEX("regex"), CHOICE("choice");

        private final String field;

        Kind(String field) {
            this.field = field;
        }

        /** The request field an error about this kind of constraint names. */
        public String field() {
            return field;
        }
    }

    public OutputConstraint {
        Objects.requireNonNull(kind, "kind");
        choices = choices == null ? List.of() : List.copyOf(choices);
        if (kind != Kind.CHOICE) {
            Objects.requireNonNull(text, kind.field());
        }
    }

    public static OutputConstraint jsonSchema(String schema) {
        return new OutputConstraint(Kind.JSON_SCHEMA, schema, List.of());
    }

    public static OutputConstraint regex(String regex) {
        return new OutputConstraint(Kind.REGEX, regex, List.of());
    }

    public static OutputConstraint choice(List<String> choices) {
        return new OutputConstraint(Kind.CHOICE, null, choices);
    }
}
