package org.mstar.sql;

import java.util.List;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.table.api.ValidationException;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.constraint.ConstraintCompiler;
import org.mstar.resources.constraint.OutputConstraint;
import org.mstar.resources.constraint.TokenVocabulary;

/**
 * Checks a model's structured-output option where the query is planned, before any TaskManager loads the model's
 * tokenizer: the constraint is compiled over a vocabulary of the 256 single bytes, which spells any text, so a
 * syntax error, an unsupported keyword or a language that matches nothing is refused by the option's name.
 */
final class OutputConstraints {
    private static final TokenVocabulary BYTES = byteVocabulary();

    private OutputConstraints() {}

    /** @param option the option that set {@code constraint}; unused when it is null */
    static void check(OutputConstraint constraint, ConfigOption<String> option) {
        if (constraint == null) {
            return;
        }
        try {
            ConstraintCompiler.compile(constraint, BYTES);
        } catch (RequestValidationException e) {
            throw ModelSettings.bad(option, constraint.text(), e.getMessage());
        }
    }

    private static TokenVocabulary byteVocabulary() {
        byte[][] bytes = new byte[257][];
        for (int b = 0; b < 256; b++) {
            bytes[b] = new byte[] {(byte) b};
        }
        bytes[256] = new byte[0]; // the end-of-sequence token
        return new TokenVocabulary(bytes, List.of(256));
    }
}
