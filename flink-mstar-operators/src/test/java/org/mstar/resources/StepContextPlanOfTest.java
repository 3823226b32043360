package org.mstar.resources;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** How a resource reads the plan of one it depends on. */
class StepContextPlanOfTest {
    private final StepContext ctx = new StepContext(List.of("r1"), "decode", 0, false);

    @Test
    void aPlanOfTheAskedTypeIsReturnedAsIt() {
        ctx.planResults().put("kv", 42);
        Integer plan = ctx.planOf("kv", Integer.class, "attention");
        assertThat(plan).isEqualTo(42);
    }

    @Test
    void aMissingPlanIsRefusedNamingTheReaderAndTheKey() {
        assertThatThrownBy(() -> ctx.planOf("kv", Integer.class, "attention"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("attention needs the plan of resource 'kv' (Integer) in this step, found none");
    }

    @Test
    void aPlanOfAnotherTypeIsRefusedNamingWhatWasFound() {
        ctx.planResults().put("kv", "not a plan");
        assertThatThrownBy(() -> ctx.planOf("kv", Integer.class, "positions"))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageEndingWith("found java.lang.String");
    }
}
