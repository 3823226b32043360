package org.mstar.model.chat;

import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.Locale;
import java.util.Map;

/** The strftime directives chat templates use for today's date (Llama 3.x: "%d %b %Y"), in English. */
final class StrftimeFormat {
    private static final Map<Character, String> PATTERNS = Map.ofEntries(
            Map.entry('Y', "yyyy"), Map.entry('y', "yy"), Map.entry('m', "MM"), Map.entry('d', "dd"),
            Map.entry('b', "MMM"), Map.entry('B', "MMMM"), Map.entry('a', "EEE"), Map.entry('A', "EEEE"),
            Map.entry('H', "HH"), Map.entry('M', "mm"), Map.entry('S', "ss"), Map.entry('j', "DDD"));

    private StrftimeFormat() {}

    static String format(LocalDateTime time, String format) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < format.length(); i++) {
            char c = format.charAt(i);
            if (c != '%' || i + 1 == format.length()) {
                out.append(c);
                continue;
            }
            char directive = format.charAt(++i);
            if (directive == '%') {
                out.append('%');
            } else if (PATTERNS.containsKey(directive)) {
                out.append(DateTimeFormatter.ofPattern(PATTERNS.get(directive), Locale.ENGLISH).format(time));
            } else {
                throw new ChatTemplateException("strftime_now: directive %" + directive + " is not supported");
            }
        }
        return out.toString();
    }
}
