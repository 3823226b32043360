package org.mstar.flink;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.message.BinaryMessageDecoder;
import org.apache.avro.specific.SpecificData;
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
    /** Fields added to GenerateRequest after its first release, newest last; clients built before them still decode. */
    private static final List<String> ADDED_FIELDS = List.of("json_schema", "regex", "choices", "messages", "audio",
            "adapter");
    private static final BinaryMessageDecoder<GenerateRequest> DECODER = decoder();

    /**
     * The current schema's decoder that also reads records written with each earlier schema: single-object encoding
     * names the writer's schema by fingerprint, and the fingerprint ignores docs, so the earlier schemas are the
     * current one without the fields added since.
     */
    static BinaryMessageDecoder<GenerateRequest> decoder() {
        Schema current = GenerateRequest.getClassSchema();
        BinaryMessageDecoder<GenerateRequest> d = new BinaryMessageDecoder<>(SpecificData.getForSchema(current), current);
        for (int dropped = 1; dropped <= ADDED_FIELDS.size(); dropped++) {
            List<String> gone = ADDED_FIELDS.subList(ADDED_FIELDS.size() - dropped, ADDED_FIELDS.size());
            List<Schema.Field> fields = new ArrayList<>();
            for (Schema.Field f : current.getFields()) {
                if (!gone.contains(f.name())) {
                    fields.add(new Schema.Field(f, f.schema()));
                }
            }
            d.addSchema(Schema.createRecord(current.getName(), current.getDoc(), current.getNamespace(), false, fields));
        }
        return d;
    }

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

    @Override
    public TypeInformation<Either<ErrorEvent, GenerateRequest>> getProducedType() {
        return new EitherTypeInfo<>(new AvroTypeInfo<>(ErrorEvent.class), new AvroTypeInfo<>(GenerateRequest.class));
    }
}
