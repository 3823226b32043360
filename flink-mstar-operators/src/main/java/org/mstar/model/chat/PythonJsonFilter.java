package org.mstar.model.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.filter.AdvancedFilter;
import java.util.Collection;
import java.util.Map;

/**
 * The {@code tojson} filter as transformers defines it for chat templates: Python's {@code json.dumps} with
 * {@code ensure_ascii=False}, so {@code {"a": 1, "b": [true, null]}} with a space after each separator, non-ASCII
 * text as is, and with {@code indent=n} one item a line. Jinjava's own tojson writes Jackson's compact form, which
 * would change the prompt a model was trained on.
 */
final class PythonJsonFilter implements AdvancedFilter {
    @Override
    public String getName() {
        return "tojson";
    }

    @Override
    public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
        Object indent = kwargs.getOrDefault("indent", args.length > 0 ? args[0] : null);
        int spaces = indent == null ? -1 : Integer.parseInt(indent.toString());
        StringBuilder out = new StringBuilder();
        write(var, spaces, 0, out);
        return out.toString();
    }

    private static void write(Object v, int indent, int depth, StringBuilder out) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long) {
            out.append(v);
        } else if (v instanceof Number n) {
            double d = n.doubleValue();
            out.append(d == Math.rint(d) && Math.abs(d) < 1e16 ? String.format("%.1f", d) : Double.toString(d));
        } else if (v instanceof Map<?, ?> m) {
            out.append('{');
            int i = 0;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                separator(i++ == 0, indent, depth + 1, out);
                string(String.valueOf(e.getKey()), out);
                out.append(": ");
                write(e.getValue(), indent, depth + 1, out);
            }
            close(m.isEmpty(), indent, depth, out).append('}');
        } else if (v instanceof Collection<?> c) {
            out.append('[');
            int i = 0;
            for (Object e : c) {
                separator(i++ == 0, indent, depth + 1, out);
                write(e, indent, depth + 1, out);
            }
            close(c.isEmpty(), indent, depth, out).append(']');
        } else {
            string(v.toString(), out);
        }
    }

    /** Python puts ", " between items, or "," and a new line with indent. */
    private static void separator(boolean first, int indent, int depth, StringBuilder out) {
        if (!first) {
            out.append(indent < 0 ? ", " : ",");
        }
        if (indent >= 0) {
            out.append('\n').append(" ".repeat(indent * depth));
        }
    }

    private static StringBuilder close(boolean empty, int indent, int depth, StringBuilder out) {
        if (indent >= 0 && !empty) {
            out.append('\n').append(" ".repeat(indent * depth));
        }
        return out;
    }

    private static void string(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
