package org.mstar.sql;

import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.table.catalog.CatalogModel;
import org.apache.flink.table.catalog.ResolvedCatalogModel;
import org.apache.flink.table.catalog.listener.AlterModelEvent;
import org.apache.flink.table.catalog.listener.CatalogModificationEvent;
import org.apache.flink.table.catalog.listener.CatalogModificationListener;
import org.apache.flink.table.catalog.listener.CatalogModificationListenerFactory;
import org.apache.flink.table.catalog.listener.CreateModelEvent;
import org.apache.flink.table.catalog.listener.ModelModificationEvent;
import org.apache.flink.table.factories.FactoryUtil;

/**
 * Checks every {@code 'provider' = 'mstar'} model when it is created or altered, so a bad option fails the
 * {@code CREATE MODEL} statement itself instead of the first query that uses the model (where Flink checks a model's
 * options otherwise). Enabled by {@code table.catalog-modification.listeners: mstar} in the Flink configuration.
 *
 * <p>A temporary model that fails the check is not created. Flink tells listeners after a catalog has stored a
 * permanent model, so a permanent one that fails stays in its catalog (and every query using it fails the same way)
 * until it is dropped or altered.
 */
@PublicEvolving
public final class ModelCheckListenerFactory implements CatalogModificationListenerFactory {

    @Override
    public String factoryIdentifier() {
        return MstarModelProviderFactory.IDENTIFIER;
    }

    @Override
    public CatalogModificationListener createListener(Context context) {
        ReadableConfig configuration = context.getConfiguration();
        ClassLoader classLoader = context.getUserClassLoader();
        return event -> check(event, configuration, classLoader);
    }

    private static void check(CatalogModificationEvent event, ReadableConfig configuration, ClassLoader classLoader) {
        CatalogModel changed = event instanceof CreateModelEvent c ? c.model()
                : event instanceof AlterModelEvent a ? a.newModel() : null;
        if (changed instanceof ResolvedCatalogModel model
                && MstarModelProviderFactory.IDENTIFIER.equals(model.getOptions().get(FactoryUtil.PROVIDER.key()))) {
            ModelModificationEvent m = (ModelModificationEvent) event;
            FactoryUtil.createModelProvider(new MstarModelProviderFactory(), m.identifier(), model, configuration,
                    classLoader, m.isTemporary());
        }
    }
}
