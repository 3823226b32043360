package org.mstar.flink.frame;

import java.nio.charset.StandardCharsets;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.EitherTypeInfo;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.types.Either;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.FrameRequest;

/**
 * Decodes frame request records and never throws: anything that is not a {@link FrameRequest} in Avro single-object
 * encoding with a session id becomes a 400 {@link ErrorEvent} on the left, named by the record key when it has one.
 */
final class FrameRequestDeserializer implements KafkaRecordDeserializationSchema<Either<ErrorEvent, FrameRequest>> {
    private static final long serialVersionUID = 1L;

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Either<ErrorEvent, FrameRequest>> out) {
        String key = record.key() == null ? null : new String(record.key(), StandardCharsets.UTF_8);
        if (record.value() == null) {
            out.collect(Either.Left(new ErrorEvent(key, FrameSessionOperator.BAD_REQUEST, "frame request record has no value")));
            return;
        }
        FrameRequest request;
        try {
            request = FrameRequest.getDecoder().decode(record.value());
        } catch (Exception e) {
            out.collect(Either.Left(new ErrorEvent(key, FrameSessionOperator.BAD_REQUEST,
                    "undecodable frame request (expected an Avro single-object encoded FrameRequest): " + e)));
            return;
        }
        if (request.getSessionId() == null || request.getSessionId().isBlank()) {
            out.collect(Either.Left(new ErrorEvent(key, FrameSessionOperator.BAD_REQUEST, "session_id: must not be empty")));
            return;
        }
        out.collect(Either.Right(request));
    }

    @Override
    public TypeInformation<Either<ErrorEvent, FrameRequest>> getProducedType() {
        return new EitherTypeInfo<>(new AvroTypeInfo<>(ErrorEvent.class), new AvroTypeInfo<>(FrameRequest.class));
    }
}
