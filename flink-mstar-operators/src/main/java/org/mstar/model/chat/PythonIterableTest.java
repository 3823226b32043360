package org.mstar.model.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.exptest.ExpTest;
import java.util.Collection;
import java.util.Map;

/**
 * Jinja's {@code is iterable} with Python's meaning: strings, lists and mappings are iterable. Jinjava's own test
 * says no for a string, so Llama 3.2's {@code message.content is mapping or message.content is iterable} would
 * print a tool result bare where transformers prints it through tojson, quoted.
 */
final class PythonIterableTest implements ExpTest {
    @Override
    public String getName() {
        return "iterable";
    }

    @Override
    public boolean evaluate(Object var, JinjavaInterpreter interpreter, Object... args) {
        return var instanceof String || var instanceof Collection<?> || var instanceof Map<?, ?>
                || var != null && var.getClass().isArray();
    }
}
