package org.mstar.model.chat;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * The Python {@code str} methods chat templates call ({@code content.startswith('<tool_response>')},
 * {@code content.split('</think>')[-1].lstrip('\n')}, ...), with Python's meaning, ahead of Jinjava's own method
 * resolution, which would otherwise find none of them on a Java String or, for {@code split}, take the separator as
 * a regular expression. Everything else falls through to the next resolver.
 */
final class PythonStringMethods extends ELResolver {
    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (!(base instanceof String s) || method == null) {
            return null;
        }
        Object[] args = params == null ? new Object[0] : params;
        Object result = call(s, method.toString(), args);
        if (result != NOT_HANDLED) {
            context.setPropertyResolved(true);
            return result;
        }
        return null;
    }

    private static final Object NOT_HANDLED = new Object();

    private static Object call(String s, String name, Object[] args) {
        return switch (name) {
            case "startswith" -> args.length == 1 ? anyOf(args[0], s::startsWith) : NOT_HANDLED;
            case "endswith" -> args.length == 1 ? anyOf(args[0], s::endsWith) : NOT_HANDLED;
            case "strip" -> args.length <= 1 ? rstrip(lstrip(s, chars(args)), chars(args)) : NOT_HANDLED;
            case "lstrip" -> args.length <= 1 ? lstrip(s, chars(args)) : NOT_HANDLED;
            case "rstrip" -> args.length <= 1 ? rstrip(s, chars(args)) : NOT_HANDLED;
            case "split" -> args.length <= 2 ? split(s, chars(args), args.length == 2 ? toInt(args[1]) : -1)
                    : NOT_HANDLED;
            case "lower" -> args.length == 0 ? s.toLowerCase(Locale.ROOT) : NOT_HANDLED;
            case "upper" -> args.length == 0 ? s.toUpperCase(Locale.ROOT) : NOT_HANDLED;
            case "title" -> args.length == 0 ? title(s) : NOT_HANDLED;
            case "capitalize" -> args.length == 0 ? capitalize(s) : NOT_HANDLED;
            default -> NOT_HANDLED;
        };
    }

    /** Python's str.startswith / endswith accept one string or a tuple (here any collection) of them. */
    private static boolean anyOf(Object arg, java.util.function.Predicate<String> test) {
        if (arg instanceof Collection<?> options) {
            return options.stream().anyMatch(o -> test.test(String.valueOf(o)));
        }
        return test.test(String.valueOf(arg));
    }

    /** The characters to strip or the separator, or null for whitespace. */
    private static String chars(Object[] args) {
        return args.length == 0 || args[0] == null ? null : args[0].toString();
    }

    private static int toInt(Object o) {
        return o instanceof Number n ? n.intValue() : Integer.parseInt(o.toString());
    }

    private static boolean strips(String chars, char c) {
        return chars == null ? Character.isWhitespace(c) : chars.indexOf(c) >= 0;
    }

    private static String lstrip(String s, String chars) {
        int i = 0;
        while (i < s.length() && strips(chars, s.charAt(i))) {
            i++;
        }
        return s.substring(i);
    }

    private static String rstrip(String s, String chars) {
        int j = s.length();
        while (j > 0 && strips(chars, s.charAt(j - 1))) {
            j--;
        }
        return s.substring(0, j);
    }

    /** Python's split: on a literal separator, or on runs of whitespace (dropping empty ends) when none is given. */
    private static List<String> split(String s, String sep, int maxSplit) {
        List<String> out = new ArrayList<>();
        if (sep == null) {
            String rest = lstrip(s, null);
            while (!rest.isEmpty() && (maxSplit < 0 || out.size() < maxSplit)) {
                int end = 0;
                while (end < rest.length() && !Character.isWhitespace(rest.charAt(end))) {
                    end++;
                }
                out.add(rest.substring(0, end));
                rest = lstrip(rest.substring(end), null);
            }
            if (!rest.isEmpty()) {
                out.add(rest);
            }
            return out;
        }
        if (sep.isEmpty()) {
            throw new ChatTemplateException("split: empty separator");
        }
        int from = 0;
        int at;
        while ((maxSplit < 0 || out.size() < maxSplit) && (at = s.indexOf(sep, from)) >= 0) {
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    private static String title(String s) {
        StringBuilder out = new StringBuilder(s.length());
        boolean start = true;
        for (char c : s.toCharArray()) {
            out.append(start ? Character.toUpperCase(c) : Character.toLowerCase(c));
            start = !Character.isLetter(c);
        }
        return out.toString();
    }

    private static String capitalize(String s) {
        return s.isEmpty() ? s : Character.toUpperCase(s.charAt(0)) + s.substring(1).toLowerCase(Locale.ROOT);
    }

    // ---------------------------------------------------------------- not a property resolver

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return null;
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return false;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {
    }
}
