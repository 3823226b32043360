package org.mstar.sql;

import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.flink.table.functions.ScalarFunction;

/** A SQL function that passes its argument through, and throws once when armed: the tests' injected failure. */
public class FailOnce extends ScalarFunction {
    static final AtomicBoolean ARMED = new AtomicBoolean();
    static final AtomicBoolean FIRED = new AtomicBoolean();

    public String eval(String value) {
        if (ARMED.compareAndSet(true, false)) {
            FIRED.set(true);
            throw new IllegalStateException("injected failure");
        }
        return value;
    }

    @Override
    public boolean isDeterministic() {
        return false;
    }
}
