package org.mstar.model.chat;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Rewrites the Jinja expression syntax that Jinjava's parser reads otherwise than Jinja into forms both read alike,
 * one tag body at a time:
 * <ul>
 *   <li>{@code seq[::-1]}, Python's reversed copy, which Jinjava cannot parse: {@code (seq | reverse | list)};</li>
 *   <li>{@code not x is defined}: Jinja tests bind tighter than {@code not}; Jinjava reads
 *       {@code (not x) is defined}: {@code not (x is defined)};</li>
 *   <li>a filtered loop, {@code for x in seq if cond}, whose condition Jinjava ignores: the sequence goes through
 *       {@link LoopIfFilter} first;</li>
 *   <li>a keyword argument's value, {@code namespace(last=messages|length - 1)}: Jinjava binds {@code name=value}
 *       tighter than the operators in the value: {@code namespace(last=(messages|length - 1))}.</li>
 * </ul>
 */
final class JinjaSyntax {
    private static final String NAME = "[A-Za-z_][A-Za-z0-9_]*";
    private static final Pattern REVERSED = Pattern.compile("(" + NAME + "(?:\\." + NAME + ")*)\\[::-1\\]");
    private static final Pattern NOT_IS = Pattern.compile("\\bnot\\s+(" + NAME + "(?:\\." + NAME
            + "|\\[[^\\]]*\\])*)\\s+is\\s+(not\\s+)?(" + NAME + ")");
    private static final Pattern FILTERED_LOOP = Pattern.compile(
            "^(\\s*for\\s+)(.+?)(\\s+in\\s+)(.+?)\\s+if\\s+(.+?)(\\s*)$", Pattern.DOTALL);
    private static final Pattern KEYWORD = Pattern.compile("\\s*" + NAME + "\\s*=(?!=)");

    private JinjaSyntax() {}

    static String rewrite(String body) {
        String s = REVERSED.matcher(body).replaceAll(m -> Matcher.quoteReplacement("(" + m.group(1)
                + " | reverse | list)"));
        s = NOT_IS.matcher(s).replaceAll(m -> Matcher.quoteReplacement("not (" + m.group(1) + " is "
                + (m.group(2) == null ? "" : "not ") + m.group(3) + ")"));
        Matcher loop = FILTERED_LOOP.matcher(s);
        if (loop.matches()) {
            s = loop.group(1) + loop.group(2) + loop.group(3) + "(" + loop.group(4) + ") | " + LoopIfFilter.NAME
                    + "(" + quoted(loop.group(2)) + ", " + quoted(loop.group(5)) + ")" + loop.group(6);
        }
        return keywordValuesInParentheses(s);
    }

    /** {@code text} as a Jinja string literal. */
    private static String quoted(String text) {
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }

    /** Puts each keyword argument's value of a call in parentheses; strings and nested brackets are kept whole. */
    private static String keywordValuesInParentheses(String s) {
        StringBuilder out = new StringBuilder(s.length() + 8);
        Deque<Character> open = new ArrayDeque<>();
        Deque<Integer> valueDepths = new ArrayDeque<>();
        char quote = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (quote != 0) {
                out.append(c);
                if (c == '\\' && i + 1 < s.length()) {
                    out.append(s.charAt(++i));
                } else if (c == quote) {
                    quote = 0;
                }
                continue;
            }
            if ((c == ',' || c == ')') && !valueDepths.isEmpty() && valueDepths.peek() == open.size()) {
                out.append(')');
                valueDepths.pop();
            }
            out.append(c);
            switch (c) {
                case '\'', '"' -> quote = c;
                case '(', '[', '{' -> open.push(c);
                case ')', ']', '}' -> {
                    if (!open.isEmpty()) {
                        open.pop();
                    }
                }
                default -> { }
            }
            if ((c == '(' || c == ',') && !open.isEmpty() && open.peek() == '(') {
                Matcher m = KEYWORD.matcher(s).region(i + 1, s.length());
                if (m.lookingAt()) {
                    out.append(s, i + 1, m.end()).append('(');
                    valueDepths.push(open.size());
                    i = m.end() - 1;
                }
            }
        }
        return out.toString();
    }
}
