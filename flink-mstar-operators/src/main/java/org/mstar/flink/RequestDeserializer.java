package org.mstar.flink;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import org.apache.avro.Schema;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.EitherTypeInfo;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.formats.avro.typeutils.AvroTypeInfo;
import org.apache.flink.types.Either;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;

/**
 * Decodes request records and never throws: a record that is not a {@link GenerateRequest} in Avro single-object
 * encoding (what {@code GenerateRequest.toByteBuffer()} writes) becomes a 400 {@link ErrorEvent} on the left,
 * named by the record key when it has one, so one bad record never restarts the job.
 */
final class RequestDeserializer implements KafkaRecordDeserializationSchema<Either<ErrorEvent, GenerateRequest>> {
    private static final long serialVersionUID = 1L;
    /** Decodes the current schema and every earlier one (producers that predate a new optional field). */
    private static final BinaryMessageDecoder<GenerateRequest> DECODER = decoder();

    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Either<ErrorEvent, GenerateRequest>> out) {
        String keyId = record.key() == null ? null : new String(record.key(), StandardCharsets.UTF_8);
        if (record.value() == null) {
            out.collect(Either.Left(new ErrorEvent(keyId, Responses.BAD_REQUEST, "request record has no value")));
            return;
        }
        GenerateRequest request;
        try {
            request = DECODER.decode(record.value());
        } catch (Exception e) {
            out.collect(Either.Left(new ErrorEvent(keyId, Responses.BAD_REQUEST,
                    "undecodable request (expected an Avro single-object encoded GenerateRequest): " + e)));
            return;
        }
        if (request.getRequestId() == null || request.getRequestId().isBlank()) {
            out.collect(Either.Left(new ErrorEvent(keyId, Responses.BAD_REQUEST, "request_id: must not be empty")));
            return;
        }
        out.collect(Either.Right(request));
    }

    private static BinaryMessageDecoder<GenerateRequest> decoder() {
        BinaryMessageDecoder<GenerateRequest> d = GenerateRequest.createDecoder(null);
        try (InputStream in = GenerateRequest.class.getResourceAsStream("previous/GenerateRequest-1.avsc")) {
            if (in == null) {
                throw new IllegalStateException("the schemas jar lacks previous/GenerateRequest-1.avsc");
            }
            d.addSchema(new Schema.Parser().parse(in));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return d;
    }

    @Override
    public TypeInformation<Either<ErrorEvent, GenerateRequest>> getProducedType() {
        return new EitherTypeInfo<>(new AvroTypeInfo<>(ErrorEvent.class), new AvroTypeInfo<>(GenerateRequest.class));
    }
}
