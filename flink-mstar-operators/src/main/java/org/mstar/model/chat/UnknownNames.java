package org.mstar.model.chat;

import com.hubspot.jinjava.interpret.Context;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The first filter or test a template names that the renderer does not have, as jinja2 refuses such a template when
 * it compiles it ("No filter named 'x'."). Jinjava would render an unknown filter's result as nothing, silently.
 */
final class UnknownNames {
    private static final Pattern TAG = Pattern.compile("\\{[{%](.*?)[%}]\\}", Pattern.DOTALL);
    private static final Pattern QUOTED = Pattern.compile("'(?:[^'\\\\]|\\\\.)*'|\"(?:[^\"\\\\]|\\\\.)*\"");
    private static final Pattern FILTER = Pattern.compile("(?<!\\|)\\|\\s*([A-Za-z_][A-Za-z0-9_]*)");
    private static final Pattern TEST = Pattern.compile("\\bis\\s+(?:not\\s+)?([A-Za-z_][A-Za-z0-9_]*)");

    private UnknownNames() {}

    /** The message for the first unknown filter or test in {@code source}, with its line, or empty. */
    static Optional<String> find(String source, Context context) {
        Matcher tag = TAG.matcher(source);
        while (tag.find()) {
            // the quoted text is blanked, not removed, so that offsets still give lines
            String body = QUOTED.matcher(tag.group(1)).replaceAll(m -> " ".repeat(m.group().length()));
            Matcher f = FILTER.matcher(body);
            while (f.find()) {
                if (context.getFilter(f.group(1)) == null) {
                    return Optional.of(message("filter", f.group(1), source, tag.start(1) + f.start()));
                }
            }
            Matcher t = TEST.matcher(body);
            while (t.find()) {
                if (context.getExpTest(t.group(1)) == null) {
                    return Optional.of(message("test", t.group(1), source, tag.start(1) + t.start()));
                }
            }
        }
        return Optional.empty();
    }

    private static String message(String kind, String name, String source, int at) {
        long line = 1 + source.substring(0, at).chars().filter(c -> c == '\n').count();
        return "the chat template cannot be rendered: No " + kind + " named '" + name + "' (line " + line + ")";
    }
}
