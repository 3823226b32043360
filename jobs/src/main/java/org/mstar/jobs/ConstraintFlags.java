package org.mstar.jobs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.SchemaParseException;
import org.mstar.flink.AvroJsonSchema;
import org.mstar.resources.constraint.ConstraintCompiler;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.schemas.GenerateRequest;
import picocli.CommandLine.Option;

/** Structured output from the command line: at most one of a JSON schema, an Avro schema, a regex or choices. */
final class ConstraintFlags {
    @Option(names = "--json-schema", paramLabel = "FILE",
            description = "The output is compact JSON valid against this JSON schema (docs/guides/structured-output.md).")
    Path jsonSchema;

    @Option(names = "--avro-schema", paramLabel = "FILE",
            description = "The output is JSON of this Avro schema's record (converted to a JSON schema).")
    Path avroSchema;

    @Option(names = "--regex", paramLabel = "REGEX", description = "The whole output matches this regular expression.")
    String regex;

    @Option(names = "--choice", paramLabel = "TEXT", split = ",",
            description = "The output is exactly one of these comma-separated strings.")
    List<String> choices;

    /**
     * The constraint the flags ask for, or null.
     *
     * @throws IllegalArgumentException when more than one is given, or a schema file cannot be read or converted
     */
    OutputConstraint constraint() {
        List<OutputConstraint> set = new ArrayList<>();
        if (jsonSchema != null) {
            set.add(checked("--json-schema " + jsonSchema, OutputConstraint.jsonSchema(read("--json-schema", jsonSchema))));
        }
        if (avroSchema != null) {
            set.add(checked("--avro-schema " + avroSchema, OutputConstraint.jsonSchema(avroAsJsonSchema())));
        }
        if (regex != null) {
            set.add(checked("--regex", OutputConstraint.regex(regex)));
        }
        if (choices != null) {
            set.add(checked("--choice", OutputConstraint.choice(choices)));
        }
        if (set.size() > 1) {
            throw new IllegalArgumentException("give at most one of --json-schema, --avro-schema, --regex and --choice");
        }
        return set.isEmpty() ? null : set.get(0);
    }

    /** Sets the request fields of {@link #constraint()} on {@code request}. */
    void applyTo(GenerateRequest request) {
        OutputConstraint c = constraint();
        if (c == null) {
            return;
        }
        switch (c.kind()) {
            case JSON_SCHEMA -> request.setJsonSchema(c.text());
            case REGEX -> request.setRegex(c.text());
            case CHOICE -> request.setChoices(c.choices());
        }
    }

    /** The JSON schema of the --avro-schema file's record. */
    private String avroAsJsonSchema() {
        String flag = "--avro-schema " + avroSchema + ": ";
        Schema avro;
        try {
            avro = new Schema.Parser().parse(read("--avro-schema", avroSchema));
        } catch (SchemaParseException e) {
            throw new IllegalArgumentException(flag + "not a valid Avro schema: " + e.getMessage());
        }
        try {
            return AvroJsonSchema.of(avro).toString();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(flag + e.getMessage());
        }
    }

    /**
     * {@code c}, checked as the engine will check it, so that a schema it cannot use is refused here, before anything
     * is sent or loaded, as a file that cannot be read is: one line, exit 2.
     */
    private static OutputConstraint checked(String flag, OutputConstraint c) {
        try {
            ConstraintCompiler.check(c);
            return c;
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(flag + ": " + e.getMessage());
        }
    }

    private static String read(String flag, Path file) {
        try {
            return Files.readString(file);
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException(flag + " " + file + ": no such file");
        } catch (IOException e) {
            throw new IllegalArgumentException(flag + " " + file + ": cannot read it (" + e + ")");
        }
    }
}
