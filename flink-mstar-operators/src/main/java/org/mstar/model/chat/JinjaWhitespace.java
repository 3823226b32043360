package org.mstar.model.chat;

/**
 * Jinja2's lexer whitespace rules, applied to a template's source as transformers configures them for chat templates:
 * {@code trim_blocks} (the first newline after a block or comment tag goes), {@code lstrip_blocks} (spaces and tabs
 * from a line's start up to a block or comment tag go), {@code -} beside a tag (all whitespace on that side goes) and
 * {@code +} (keeps what lstrip_blocks or trim_blocks would take). The result is an equivalent template with no
 * whitespace control left for Jinjava to interpret, whose own rules differ (it strips inside lines and keeps what
 * {@code -} asks to strip after indentation).
 *
 * <p>Every newline taken out is put back inside an empty comment in its place, so that each tag stays on its line
 * and an error names the line of the template as written.
 */
final class JinjaWhitespace {
    private JinjaWhitespace() {}

    /** {@code source} with its whitespace control applied. */
    static String apply(String source) {
        StringBuilder out = new StringBuilder(source.length());
        StringBuilder text = new StringBuilder();
        boolean lineStarting = true;
        boolean stripNext = false;
        boolean trimNext = false;
        int i = 0;
        while (i < source.length()) {
            int start = nextTag(source, i);
            text.append(source, i, start < 0 ? source.length() : start);
            if (start < 0) {
                flushText(text, stripNext, trimNext, false, false, lineStarting, out);
                break;
            }
            char kind = source.charAt(start + 1);
            int bodyStart = start + 2;
            char sign = bodyStart < source.length() ? source.charAt(bodyStart) : ' ';
            boolean stripBefore = sign == '-';
            boolean keepBefore = sign == '+';
            if (stripBefore || keepBefore) {
                bodyStart++;
            }
            int end = tagEnd(source, bodyStart, kind);
            boolean stripAfter = source.charAt(end - 1) == '-';
            boolean keepAfter = source.charAt(end - 1) == '+' && kind != '{';
            boolean lstrip = kind != '{' && !keepBefore;
            flushText(text, stripNext, trimNext, stripBefore, lstrip, lineStarting, out);
            String body = source.substring(bodyStart, stripAfter || keepAfter ? end - 1 : end);
            if (kind == '#') {
                // a comment renders nothing; its newlines stay for the line numbers
                out.append("{#").append(body.replaceAll("[^\\n]", "")).append("#}");
            } else {
                out.append('{').append(kind).append(JinjaSyntax.rewrite(body)).append(kind == '{' ? "}}" : "%}");
            }
            i = end + 2;
            stripNext = stripAfter;
            trimNext = kind != '{' && !keepAfter && !stripAfter;
            // Jinja's "line starting": the tag (with a newline trim_blocks takes) ended a line
            lineStarting = trimNext && i < source.length() && source.charAt(i) == '\n';
        }
        return out.toString();
    }

    /**
     * Writes the text between two tags with the rules of the tags on either side: {@code stripAfterTag} (a "-" ending
     * the tag before), {@code trimAfterTag} (trim_blocks after it), {@code stripBeforeTag} (a "-" opening the tag
     * after), {@code lstrip} (lstrip_blocks for the tag after).
     */
    private static void flushText(StringBuilder text, boolean stripAfterTag, boolean trimAfterTag,
                                  boolean stripBeforeTag, boolean lstrip, boolean lineStarting, StringBuilder out) {
        String t = text.toString();
        text.setLength(0);
        int from = 0;
        if (stripAfterTag) {
            while (from < t.length() && Character.isWhitespace(t.charAt(from))) {
                from++;
            }
        } else if (trimAfterTag && t.startsWith("\n")) {
            from = 1;
        }
        int to = t.length();
        if (stripBeforeTag) {
            while (to > from && Character.isWhitespace(t.charAt(to - 1))) {
                to--;
            }
        } else if (lstrip) {
            int lineStart = t.lastIndexOf('\n') + 1;
            boolean atLineStart = lineStart > 0 || lineStarting || from > 0 && t.charAt(from - 1) == '\n';
            if (atLineStart && lineStart <= t.length() && t.substring(Math.max(lineStart, from)).isBlank()) {
                to = Math.max(lineStart, from);
            }
        }
        keepNewlines(t.substring(0, from), out);
        out.append(t, from, to);
        keepNewlines(t.substring(to), out);
    }

    private static void keepNewlines(String removed, StringBuilder out) {
        String newlines = removed.replaceAll("[^\\n]", "");
        if (!newlines.isEmpty()) {
            out.append("{#").append(newlines).append("#}");
        }
    }

    /** Where the next tag ({@code {{}, {@code {%}, {@code {#}) opens at or after {@code from}, or -1. */
    private static int nextTag(String s, int from) {
        for (int i = s.indexOf('{', from); i >= 0 && i + 1 < s.length(); i = s.indexOf('{', i + 1)) {
            char c = s.charAt(i + 1);
            if (c == '{' || c == '%' || c == '#') {
                return i;
            }
        }
        return -1;
    }

    /**
     * Where the closing delimiter of a tag of {@code kind} opened before {@code from} starts (the index of its "%",
     * "}" or "#"). As in Jinja's lexer, quoted strings and open brackets inside expressions and statements do not
     * end a tag ({@code {{ {"a": {"b": 1}} }}}).
     */
    private static int tagEnd(String s, int from, char kind) {
        char close = kind == '{' ? '}' : kind;
        char quote = 0;
        int depth = 0;
        for (int i = from; i + 1 < s.length(); i++) {
            char c = s.charAt(i);
            if (quote != 0) {
                if (c == '\\') {
                    i++;
                } else if (c == quote) {
                    quote = 0;
                }
            } else if (kind != '#' && (c == '\'' || c == '"')) {
                quote = c;
            } else if (depth == 0 && c == close && s.charAt(i + 1) == '}') {
                return i;
            } else if (kind != '#' && (c == '(' || c == '[' || c == '{')) {
                depth++;
            } else if (kind != '#' && depth > 0 && (c == ')' || c == ']' || c == '}')) {
                depth--;
            }
        }
        throw new ChatTemplateException("the chat template cannot be rendered: a tag is not closed (line "
                + (1 + s.substring(0, from).chars().filter(ch -> ch == '\n').count()) + ")");
    }
}
