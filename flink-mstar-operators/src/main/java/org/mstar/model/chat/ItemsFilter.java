package org.mstar.model.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.filter.Filter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Jinja's {@code items} filter ({@code for key, val in tool|items}, as Mistral's template loops over a tool): a
 * mapping's (key, value) pairs in its order. Jinjava has none, and an unknown filter would drop the loop.
 */
final class ItemsFilter implements Filter {
    @Override
    public String getName() {
        return "items";
    }

    @Override
    public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
        if (var == null) {
            return List.of();
        }
        if (!(var instanceof Map<?, ?> map)) {
            throw new ChatTemplateException("items: " + var.getClass().getSimpleName() + " is not a mapping");
        }
        List<List<Object>> pairs = new ArrayList<>(map.size());
        map.forEach((k, v) -> pairs.add(java.util.Arrays.asList(k, v)));
        return pairs;
    }
}
