package org.mstar.flink;

import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceEvent;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumState;
import org.apache.flink.connector.kafka.source.split.KafkaPartitionSplit;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A {@link KafkaSource} whose consumer-group offsets reach the broker when a checkpoint completes, not up to 10 s
 * later or never.
 *
 * <p>Why: on checkpoint completion the Kafka reader queues the offset commit as a task of its fetcher thread, but
 * queuing does not interrupt the fetcher, which sits in {@code consumer.poll} for up to 10 s (the connector's fixed
 * poll timeout) whenever no record arrives. On an idle requests topic every commit so waited; a job killed within
 * that window left the group without offsets on the broker, so monitoring saw no progress and a fresh start read
 * everything again. After each notification this reader asks the fetcher to resume a split it already reads —
 * a no-op for the consumer, but, unlike a queued commit, it wakes the fetcher, which then runs the commit at once.
 */
final class PromptCommitKafkaSource<T>
        implements Source<T, KafkaPartitionSplit, KafkaSourceEnumState>, ResultTypeQueryable<T> {
    private static final long serialVersionUID = 1L;

    private final KafkaSource<T> kafka;

    PromptCommitKafkaSource(KafkaSource<T> kafka) {
        this.kafka = kafka;
    }

    @Override
    public SourceReader<T, KafkaPartitionSplit> createReader(SourceReaderContext context) throws Exception {
        return new Reader<>(kafka.createReader(context));
    }

    @Override
    public Boundedness getBoundedness() {
        return kafka.getBoundedness();
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> createEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context) throws Exception {
        return kafka.createEnumerator(context);
    }

    @Override
    public SplitEnumerator<KafkaPartitionSplit, KafkaSourceEnumState> restoreEnumerator(
            SplitEnumeratorContext<KafkaPartitionSplit> context, KafkaSourceEnumState state) throws Exception {
        return kafka.restoreEnumerator(context, state);
    }

    @Override
    public SimpleVersionedSerializer<KafkaPartitionSplit> getSplitSerializer() {
        return kafka.getSplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<KafkaSourceEnumState> getEnumeratorCheckpointSerializer() {
        return kafka.getEnumeratorCheckpointSerializer();
    }

    @Override
    public TypeInformation<T> getProducedType() {
        return kafka.getProducedType();
    }

    /** The Kafka reader, woken after each offset commit it queues. */
    private static final class Reader<T> implements SourceReader<T, KafkaPartitionSplit> {
        private final SourceReader<T, KafkaPartitionSplit> kafka;
        /** Ids of the splits this reader was given and holds; resuming one of them wakes its fetcher. */
        private final Set<String> splits = new HashSet<>();

        Reader(SourceReader<T, KafkaPartitionSplit> kafka) {
            this.kafka = kafka;
        }

        @Override
        public void notifyCheckpointComplete(long checkpointId) throws Exception {
            kafka.notifyCheckpointComplete(checkpointId);
            if (!splits.isEmpty()) {
                // Nothing is paused here (no watermark alignment), so resuming changes nothing but the wake-up.
                kafka.pauseOrResumeSplits(List.of(), List.copyOf(splits));
            }
        }

        @Override
        public List<KafkaPartitionSplit> snapshotState(long checkpointId) {
            List<KafkaPartitionSplit> held = kafka.snapshotState(checkpointId);
            splits.clear();
            held.forEach(s -> splits.add(s.splitId()));
            return held;
        }

        @Override
        public void addSplits(List<KafkaPartitionSplit> added) {
            added.forEach(s -> splits.add(s.splitId()));
            kafka.addSplits(added);
        }

        @Override
        public void start() {
            kafka.start();
        }

        @Override
        public InputStatus pollNext(ReaderOutput<T> output) throws Exception {
            return kafka.pollNext(output);
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return kafka.isAvailable();
        }

        @Override
        public void notifyNoMoreSplits() {
            kafka.notifyNoMoreSplits();
        }

        @Override
        public void handleSourceEvents(SourceEvent event) {
            kafka.handleSourceEvents(event);
        }

        @Override
        public void pauseOrResumeSplits(Collection<String> pause, Collection<String> resume) {
            kafka.pauseOrResumeSplits(pause, resume);
        }

        @Override
        public void notifyCheckpointAborted(long checkpointId) throws Exception {
            kafka.notifyCheckpointAborted(checkpointId);
        }

        @Override
        public void close() throws Exception {
            kafka.close();
        }
    }
}
