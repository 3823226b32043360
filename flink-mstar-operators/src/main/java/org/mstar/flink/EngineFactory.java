package org.mstar.flink;

import java.io.Serializable;
import java.lang.reflect.InvocationTargetException;
import org.apache.flink.annotation.PublicEvolving;
import org.apache.flink.configuration.ReadableConfig;
import org.mstar.engine.GenerationEngine;

/**
 * Builds the engine of one operator subtask. Instances travel inside the job graph, so they hold only
 * configuration (a model folder, options); weights and device memory are created by {@link #create}, which
 * runs in the operator's {@code open()} on the TaskManager.
 */
@PublicEvolving
@FunctionalInterface
public interface EngineFactory extends Serializable {

    /**
     * @param device the resolved device of this subtask: {@code cpu} or {@code cuda:N}
     * @param subtaskIndex index of the subtask, for logs and per-subtask names
     */
    GenerationEngine create(String device, int subtaskIndex) throws Exception;

    /**
     * The factory named by {@link GenerateOptions#ENGINE_FACTORY}, built through its public constructor taking the
     * job's configuration.
     */
    static EngineFactory fromConfig(ReadableConfig config, ClassLoader classLoader) {
        String className = config.get(GenerateOptions.ENGINE_FACTORY);
        try {
            Class<? extends EngineFactory> type =
                    Class.forName(className, true, classLoader).asSubclass(EngineFactory.class);
            return type.getConstructor(ReadableConfig.class).newInstance(config);
        } catch (InvocationTargetException e) {
            throw new IllegalArgumentException(e.getCause().getMessage(), e.getCause());
        } catch (ReflectiveOperationException | ClassCastException e) {
            throw new IllegalArgumentException("'" + GenerateOptions.ENGINE_FACTORY.key() + "' = " + className
                    + " is not an EngineFactory with a public (ReadableConfig) constructor", e);
        }
    }
}
