package org.mstar.resources.constraint;

import dk.brics.automaton.Automaton;
import dk.brics.automaton.BasicAutomata;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import org.mstar.resources.RequestValidationException;

/**
 * The language of a regular expression in Java syntax, matched against the whole output, as an automaton over
 * UTF-16 code units.
 *
 * <p>Supported: literals and escapes ({@code \t \n \r \f \e \a \xhh \x{h..} \\uhhhh} and escaped punctuation),
 * {@code .} (any code point but a line terminator, as in Java), classes ({@code [a-z]}, {@code [^...]},
 * {@code \d \D \w \W \s \S}, also inside classes), groups {@code (...)}, {@code (?:...)}, {@code (?<name>...)},
 * alternation, and the quantifiers {@code * + ? {n} {n,} {n,m}} (reluctant forms too: for a whole match they
 * accept the same strings). A leading {@code ^} and a trailing {@code $} are accepted and change nothing.
 * Anything else — back references, look-around, possessive quantifiers, inline flags, boundaries, Unicode
 * properties, class intersections — is refused with a message naming it, never silently read otherwise.
 */
final class RegexLanguage {
    private static final String FIELD = OutputConstraint.Kind.REGEX.field();

    private final String pattern;
    private int pos;

    private RegexLanguage(String pattern) {
        this.pattern = pattern;
    }

    /**
     * @throws RequestValidationException naming the construct or the syntax error
     */
    static Automaton of(String regex) {
        try {
            Pattern.compile(regex);
        } catch (PatternSyntaxException e) {
            throw new RequestValidationException(FIELD, "invalid regular expression: " + e.getDescription()
                    + " near index " + e.getIndex() + " of " + regex);
        }
        RegexLanguage p = new RegexLanguage(regex);
        if (p.peek('^')) {
            p.pos++;
        }
        Automaton a = p.alternation();
        if (p.peek('$') && p.pos == regex.length() - 1) {
            p.pos++;
        }
        if (p.pos < regex.length()) {
            throw p.unsupported("'" + regex.charAt(p.pos) + "' here");
        }
        a.minimize();
        return a;
    }

    private Automaton alternation() {
        List<Automaton> options = new ArrayList<>();
        options.add(sequence());
        while (peek('|')) {
            pos++;
            options.add(sequence());
        }
        return options.size() == 1 ? options.get(0) : Automaton.union(options);
    }

    private Automaton sequence() {
        List<Automaton> parts = new ArrayList<>();
        while (pos < pattern.length() && !peek('|') && !peek(')')) {
            if (peek('$') && pos == pattern.length() - 1) {
                break;
            }
            parts.add(quantified(atom()));
        }
        return parts.isEmpty() ? BasicAutomata.makeEmptyString() : Automaton.concatenate(parts);
    }

    private Automaton quantified(Automaton atom) {
        Automaton a = atom;
        while (pos < pattern.length()) {
            char c = pattern.charAt(pos);
            if (c == '*') {
                pos++;
                a = a.repeat();
            } else if (c == '+') {
                pos++;
                a = a.repeat(1);
            } else if (c == '?') {
                pos++;
                a = a.optional();
            } else if (c == '{') {
                a = bounded(a);
            } else {
                break;
            }
            if (peek('?')) {
                pos++; // reluctant: same language for a whole match
            } else if (peek('+')) {
                throw unsupported("possessive quantifiers");
            }
        }
        return a;
    }

    private Automaton bounded(Automaton a) {
        int close = pattern.indexOf('}', pos);
        String body = pattern.substring(pos + 1, close);
        pos = close + 1;
        int comma = body.indexOf(',');
        int min = Integer.parseInt(body.substring(0, comma < 0 ? body.length() : comma).trim());
        if (comma < 0) {
            return a.repeat(min, min);
        }
        String upper = body.substring(comma + 1).trim();
        return upper.isEmpty() ? a.repeat(min) : a.repeat(min, Integer.parseInt(upper));
    }

    private Automaton atom() {
        char c = pattern.charAt(pos);
        switch (c) {
            case '(' -> {
                pos++;
                if (peek('?')) {
                    groupPrefix();
                }
                Automaton inner = alternation();
                expect(')');
                return inner;
            }
            case '[' -> {
                return characterClass();
            }
            case '.' -> {
                pos++;
                return CodePointSets.except(lineTerminators());
            }
            case '\\' -> {
                pos++;
                return escape(false);
            }
            case '^', '$' -> throw unsupported("'" + c + "' other than at the very start or end");
            default -> {
                int cp = pattern.codePointAt(pos);
                pos += Character.charCount(cp);
                return BasicAutomata.makeString(new String(Character.toChars(cp)));
            }
        }
    }

    private void groupPrefix() {
        if (pattern.startsWith("?:", pos)) {
            pos += 2;
        } else if (pattern.startsWith("?<", pos) && pos + 2 < pattern.length()
                && Character.isLetter(pattern.charAt(pos + 2))) {
            pos = pattern.indexOf('>', pos) + 1; // a named group is a plain group here
        } else if (pattern.startsWith("?=", pos) || pattern.startsWith("?!", pos) || pattern.startsWith("?<=", pos)
                || pattern.startsWith("?<!", pos)) {
            throw unsupported("look-around");
        } else if (pattern.startsWith("?>", pos)) {
            throw unsupported("atomic groups");
        } else {
            throw unsupported("inline flags");
        }
    }

    /** After a backslash outside a class. */
    private Automaton escape(boolean inClass) {
        char c = pattern.charAt(pos);
        List<char[]> shorthand = shorthandRanges(c);
        if (shorthand != null) {
            pos++;
            return Character.isUpperCase(c) ? CodePointSets.except(shorthand) : CodePointSets.of(shorthand);
        }
        int cp = escapedCodePoint(inClass);
        return BasicAutomata.makeString(new String(Character.toChars(cp)));
    }

    /** The code point of a single-character escape at {@code pos} (after the backslash); advances past it. */
    private int escapedCodePoint(boolean inClass) {
        char c = pattern.charAt(pos++);
        switch (c) {
            case 't': return '\t';
            case 'n': return '\n';
            case 'r': return '\r';
            case 'f': return '\f';
            case 'a': return 0x07;
            case 'e': return 0x1B;
            case '0': {
                int start = pos;
                while (pos < pattern.length() && pos - start < 3 && pattern.charAt(pos) >= '0' && pattern.charAt(pos) <= '7') {
                    pos++;
                }
                return Integer.parseInt(pattern.substring(start, pos), 8);
            }
            case 'x': {
                if (peek('{')) {
                    int close = pattern.indexOf('}', pos);
                    int cp = Integer.parseInt(pattern.substring(pos + 1, close), 16);
                    pos = close + 1;
                    return cp;
                }
                pos += 2;
                return Integer.parseInt(pattern.substring(pos - 2, pos), 16);
            }
            case 'u': {
                pos += 4;
                return Integer.parseInt(pattern.substring(pos - 4, pos), 16);
            }
            case 'c': {
                return pattern.charAt(pos++) ^ 64;
            }
            default:
                if (Character.isLetterOrDigit(c)) {
                    throw unsupported("the escape \\" + c + (inClass ? " in a class" : ""));
                }
                return c;
        }
    }

    private Automaton characterClass() {
        pos++; // [
        boolean negated = peek('^');
        if (negated) {
            pos++;
        }
        List<char[]> ranges = new ArrayList<>();
        List<Automaton> negatedShorthands = new ArrayList<>();
        boolean first = true;
        while (!peek(']') || first) {
            first = false;
            char c = pattern.charAt(pos);
            if (c == '[' || pattern.startsWith("&&", pos)) {
                throw unsupported("nested classes and class intersections");
            }
            int lo;
            if (c == '\\') {
                pos++;
                char e = pattern.charAt(pos);
                List<char[]> shorthand = shorthandRanges(e);
                if (shorthand != null) {
                    pos++;
                    if (Character.isUpperCase(e)) {
                        negatedShorthands.add(CodePointSets.except(shorthand));
                    } else {
                        ranges.addAll(shorthand);
                    }
                    continue;
                }
                lo = escapedCodePoint(true);
            } else {
                lo = pattern.codePointAt(pos);
                pos += Character.charCount(lo);
            }
            int hi = lo;
            if (peek('-') && pos + 1 < pattern.length() && pattern.charAt(pos + 1) != ']') {
                pos++;
                if (peek('\\')) {
                    pos++;
                    hi = escapedCodePoint(true);
                } else {
                    hi = pattern.codePointAt(pos);
                    pos += Character.charCount(hi);
                }
            }
            if (hi > 0xFFFF) {
                throw unsupported("characters outside the Basic Multilingual Plane in a class");
            }
            ranges.add(new char[] {(char) lo, (char) hi});
        }
        pos++; // ]
        if (negated) {
            if (!negatedShorthands.isEmpty()) {
                throw unsupported("\\D, \\W or \\S inside a negated class");
            }
            return CodePointSets.except(ranges);
        }
        negatedShorthands.add(CodePointSets.of(ranges));
        return Automaton.union(negatedShorthands);
    }

    /** The ranges of a shorthand class letter (lower or upper case), or null when {@code c} is none. */
    private static List<char[]> shorthandRanges(char c) {
        return switch (Character.toLowerCase(c)) {
            case 'd' -> List.of(new char[] {'0', '9'});
            case 'w' -> List.of(new char[] {'a', 'z'}, new char[] {'A', 'Z'}, new char[] {'0', '9'}, new char[] {'_', '_'});
            case 's' -> List.of(new char[] {' ', ' '}, new char[] {'\t', '\r'});
            default -> null;
        };
    }

    private static List<char[]> lineTerminators() {
        return List.of(new char[] {'\n', '\n'}, new char[] {'\r', '\r'}, new char[] {'\u0085', '\u0085'},
                new char[] {'\u2028', '\u2029'});
    }

    private boolean peek(char c) {
        return pos < pattern.length() && pattern.charAt(pos) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw new RequestValidationException(FIELD, "expected '" + c + "' at index " + pos + " of " + pattern);
        }
        pos++;
    }

    private RequestValidationException unsupported(String what) {
        return new RequestValidationException(FIELD, "unsupported in a constraint: " + what + " (index " + pos
                + " of " + pattern + ")");
    }
}
