package org.mstar.sql;

import java.util.Set;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.factories.ModelProviderFactory;

/**
 * {@code CREATE MODEL m INPUT (prompt STRING) OUTPUT (text STRING) WITH ('provider' = 'mstar', ...)}: a model served
 * by this project's engine inside the job, found by Flink's factory discovery (META-INF/services). The options are
 * {@link MstarModelOptions}; unknown keys and bad values are refused by name.
 */
@PublicEvolving
public final class MstarModelProviderFactory implements ModelProviderFactory {
    public static final String IDENTIFIER = "mstar";

    @Override
    public String factoryIdentifier() {
        return IDENTIFIER;
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return Set.of();
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return Set.of(MstarModelOptions.MODEL_DIR, MstarModelOptions.MODEL_RANDOM, MstarModelOptions.DEVICE,
                MstarModelOptions.GPU_RESOURCE, MstarModelOptions.MAX_TOKENS, MstarModelOptions.TEMPERATURE,
                MstarModelOptions.TOP_K, MstarModelOptions.TOP_P, MstarModelOptions.MIN_P,
                MstarModelOptions.REPETITION_PENALTY, MstarModelOptions.SEED, MstarModelOptions.CHAT_TEMPLATE,
                MstarModelOptions.JSON_SCHEMA, MstarModelOptions.REGEX, MstarModelOptions.ON_ERROR, MstarModelOptions.IGNORE_EOS,
                MstarModelOptions.ENGINE_FACTORY, MstarModelOptions.GPU_MEMORY_FRACTION,
                MstarModelOptions.MAX_BATCH_ROWS, MstarModelOptions.TOKEN_BUDGET, MstarModelOptions.DECODE_GRAPHS,
                MstarModelOptions.BATCH_INVARIANT, MstarModelOptions.MAX_SEQ_LEN, MstarModelOptions.PAGES,
                MstarModelOptions.PAGE_SIZE, MstarModelOptions.PREFIX_CACHE, MstarModelOptions.CPU_OFFLOAD_PAGES,
                MstarModelOptions.ADAPTERS_DIR, MstarModelOptions.ADAPTER_SLOTS);
    }

    @Override
    public MstarModelProvider createModelProvider(Context context) {
        FactoryUtil.ModelProviderFactoryHelper helper = FactoryUtil.createModelProviderFactoryHelper(this, context);
        helper.validate();
        return new MstarModelProvider(new ModelRuntime(context.getObjectIdentifier().asSummaryString(),
                ModelSettings.from(helper.getOptions()), ModelColumns.of(context.getCatalogModel())));
    }
}
