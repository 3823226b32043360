package org.mstar.model.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.filter.AdvancedFilter;
import com.hubspot.jinjava.util.ObjectTruthValue;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

/**
 * Jinja's filtered loop, {@code {% for key, val in tool|items if key != "return" %}}, which Jinjava's for tag reads
 * without its condition. {@link JinjaSyntax} rewrites it to {@code for key, val in (tool|items) | jinja_loop_if(
 * 'key, val', 'key != "return"')}: the items the condition keeps, before the loop counts them, so that
 * {@code loop.last} means what it means in Jinja.
 */
final class LoopIfFilter implements AdvancedFilter {
    static final String NAME = "jinja_loop_if";

    @Override
    public String getName() {
        return NAME;
    }

    @Override
    public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
        String[] names = args[0].toString().split("\\s*,\\s*");
        String condition = args[1].toString();
        Collection<?> items = var instanceof Map<?, ?> m ? m.keySet() : var instanceof Collection<?> c ? c : List.of();
        List<Object> kept = new ArrayList<>();
        for (Object item : items) {
            try (var scope = interpreter.enterScope()) {
                if (names.length == 1) {
                    interpreter.getContext().put(names[0].trim(), item);
                } else {
                    List<?> parts = item instanceof List<?> l ? l : List.of(item);
                    for (int i = 0; i < names.length && i < parts.size(); i++) {
                        interpreter.getContext().put(names[i].trim(), parts.get(i));
                    }
                }
                if (ObjectTruthValue.evaluate(interpreter.resolveELExpression(condition,
                        interpreter.getLineNumber()))) {
                    kept.add(item);
                }
            }
        }
        return kept;
    }
}
