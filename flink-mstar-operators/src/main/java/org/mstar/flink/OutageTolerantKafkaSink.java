package org.mstar.flink;

import java.io.IOException;
import java.util.Collection;
import java.util.List;
import org.apache.flink.annotation.Internal;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.connector.sink2.Committer;
import org.apache.flink.api.connector.sink2.CommitterInitContext;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.connector.kafka.sink.KafkaCommittable;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaWriterState;
import org.apache.flink.connector.kafka.sink.TwoPhaseCommittingStatefulSink;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.connector.sink2.CommittableMessage;
import org.apache.flink.streaming.api.connector.sink2.SupportsPostCommitTopology;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.lineage.LineageVertex;
import org.apache.flink.streaming.api.lineage.LineageVertexProvider;
import org.apache.kafka.common.KafkaException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link KafkaSink} whose writers close even when the broker cannot be reached.
 *
 * <p>Why: a writer closed after its task failed aborts its open transaction. With the broker away the abort times
 * out ({@code max.block.ms}) and throws while the task cleans up, which Flink takes as fatal for the whole
 * TaskManager; on serve's (and frames') local cluster that is the only one, and the job could not run again once the
 * broker was back. Nothing is lost by closing without the abort: the next attempt's writer aborts the transactions
 * its subtask left open, and the broker aborts any other at {@code transaction.timeout.ms}.
 */
@Internal
public final class OutageTolerantKafkaSink<IN>
        implements TwoPhaseCommittingStatefulSink<IN, KafkaWriterState, KafkaCommittable>,
        SupportsPostCommitTopology<KafkaCommittable>, LineageVertexProvider {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(OutageTolerantKafkaSink.class);

    private final KafkaSink<IN> sink;

    public OutageTolerantKafkaSink(KafkaSink<IN> sink) {
        this.sink = sink;
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> createWriter(
            WriterInitContext context) throws IOException {
        return new Writer<>(sink.createWriter(context), context.metricGroup());
    }

    @Override
    public PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> restoreWriter(
            WriterInitContext context, Collection<KafkaWriterState> recoveredState) throws IOException {
        return new Writer<>(sink.restoreWriter(context, recoveredState), context.metricGroup());
    }

    @Override
    public Committer<KafkaCommittable> createCommitter(CommitterInitContext context) {
        return sink.createCommitter(context);
    }

    @Override
    public SimpleVersionedSerializer<KafkaCommittable> getCommittableSerializer() {
        return sink.getCommittableSerializer();
    }

    @Override
    public SimpleVersionedSerializer<KafkaWriterState> getWriterStateSerializer() {
        return sink.getWriterStateSerializer();
    }

    @Override
    public void addPostCommitTopology(DataStream<CommittableMessage<KafkaCommittable>> committables) {
        sink.addPostCommitTopology(committables);
    }

    @Override
    public LineageVertex getLineageVertex() {
        return sink.getLineageVertex();
    }

    /**
     * The Kafka writer, but a close that cannot reach the broker is logged instead of thrown. It counts its flushes
     * and their time (metrics {@code mstar.flushes} and {@code mstar.flushMicros}): before each checkpoint barrier
     * the writer waits until the broker has every record sent so far, and this task takes no records meanwhile.
     */
    private static final class Writer<IN>
            implements PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> {
        private final PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> writer;
        private final Counter flushes;
        private final Counter flushMicros;

        Writer(PrecommittingStatefulSinkWriter<IN, KafkaWriterState, KafkaCommittable> writer, MetricGroup metrics) {
            this.writer = writer;
            MetricGroup mstar = metrics.addGroup("mstar");
            flushes = mstar.counter("flushes");
            flushMicros = mstar.counter("flushMicros");
        }

        @Override
        public void write(IN element, Context context) throws IOException, InterruptedException {
            writer.write(element, context);
        }

        @Override
        public void flush(boolean endOfInput) throws IOException, InterruptedException {
            long start = System.nanoTime();
            writer.flush(endOfInput);
            flushes.inc();
            flushMicros.inc((System.nanoTime() - start) / 1000);
        }

        @Override
        public void writeWatermark(Watermark watermark) throws IOException, InterruptedException {
            writer.writeWatermark(watermark);
        }

        @Override
        public Collection<KafkaCommittable> prepareCommit() throws IOException, InterruptedException {
            return writer.prepareCommit();
        }

        @Override
        public List<KafkaWriterState> snapshotState(long checkpointId) throws IOException {
            return writer.snapshotState(checkpointId);
        }

        @Override
        public void close() throws Exception {
            try {
                writer.close();
            } catch (KafkaException | IOException e) {
                LOG.warn("Closed a Kafka writer without reaching the broker ({}); the transaction it had open is"
                        + " aborted by the next writer of its subtask or by the broker's transaction timeout",
                        e.getMessage());
            }
        }
    }
}
