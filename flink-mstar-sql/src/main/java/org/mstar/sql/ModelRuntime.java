package org.mstar.sql;

import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.execution.SuppressRestartsException;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.functions.FunctionContext;
import org.mstar.engine.GenerationRequest;
import org.mstar.flink.DeviceAssignment;
import org.mstar.model.ModelConfig;
import org.mstar.resources.RequestValidationException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a predict function of one subtask runs: the engine on the subtask's device (weights shared by the subtasks of
 * a TaskManager), driven by an {@link EngineLoop} that batches the rows pending at once into each step, and the
 * conversion of rows. Serializable configuration; the engine exists between {@link #open} and {@link #close}.
 */
final class ModelRuntime implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(ModelRuntime.class);

    private final String modelName;
    private final ModelSettings settings;
    private final RowConverter converter;

    private transient EngineLoop loop;
    /** Request ids of this subtask's rows: unique among the rows the engine holds at once. */
    private transient AtomicLong rows;

    ModelRuntime(String modelName, ModelSettings settings, ModelColumns columns) {
        this.modelName = modelName;
        this.settings = settings;
        this.converter = new RowConverter(settings, columns);
    }

    /**
     * Builds the engine on this subtask's device and starts its loop.
     *
     * @throws SuppressRestartsException when the model folder is not one: a restart would fail the same way
     * @throws Exception when the engine factory cannot build the engine
     */
    void open(FunctionContext context) throws Exception {
        int subtask = context.getTaskInfo().getIndexOfThisSubtask();
        String device = DeviceAssignment.resolve(settings.device,
                context.getExternalResourceInfos(settings.gpuResource), subtask);
        String folder;
        try {
            folder = settings.modelDir != null ? modelFolder(settings.modelDir)
                    : RandomModels.folder(settings.randomConfig).toString();
        } catch (IllegalArgumentException e) {
            throw new SuppressRestartsException(e);
        }
        loop = new EngineLoop(settings.engineFactory(folder).create(device, subtask),
                "mstar model " + modelName + " subtask " + subtask);
        rows = new AtomicLong();
        MetricGroup metrics = context.getMetricGroup().addGroup("mstar");
        EngineLoop engine = loop;
        metrics.gauge("engineSteps", engine::steps);
        metrics.gauge("widestStep", engine::widestStep);
        LOG.info("Model {} (subtask {}) serves {} on {}", modelName, subtask, folder, device);
    }

    private static String modelFolder(String dir) {
        if (!Files.isRegularFile(Path.of(dir, ModelConfig.FILE_NAME))) {
            throw new IllegalArgumentException("'" + MstarModelOptions.MODEL_DIR.key() + "' = '" + dir + "': no "
                    + ModelConfig.FILE_NAME + " there (a model folder in Hugging Face layout holds config.json,"
                    + " *.safetensors and tokenizer.json)");
        }
        return dir;
    }

    /**
     * The output rows of {@code input} (always one), once generated. A row the model cannot serve completes with an
     * error row, or exceptionally with a {@link RowFailure} under {@code 'on-error' = 'fail'}; an engine failure
     * completes exceptionally either way.
     */
    CompletableFuture<Collection<RowData>> predict(RowData input) {
        GenerationRequest request;
        try {
            request = converter.request(Long.toString(rows.getAndIncrement()), input);
        } catch (RequestValidationException e) {
            return answer(CompletableFuture.failedFuture(new RowFailure(400, e.getMessage())));
        }
        return answer(loop.submit(request).thenApply(converter::row));
    }

    private CompletableFuture<Collection<RowData>> answer(CompletableFuture<RowData> generated) {
        return generated.handle((row, error) -> {
            Throwable cause = error instanceof java.util.concurrent.CompletionException c ? c.getCause() : error;
            if (cause == null) {
                return List.of(row);
            }
            if (cause instanceof RowFailure failure && settings.onError == MstarModelOptions.OnError.ROW) {
                return List.of(converter.errorRow(failure));
            }
            throw cause instanceof RuntimeException r ? r : new IllegalStateException(cause);
        });
    }

    void close() throws InterruptedException {
        if (loop != null) {
            loop.close();
            loop = null;
        }
    }
}
