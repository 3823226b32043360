package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.message.BinaryMessageEncoder;
import org.apache.flink.types.Either;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.mstar.schemas.ErrorEvent;
import org.mstar.schemas.GenerateRequest;

class RequestDeserializerTest {
    private final RequestDeserializer deserializer = new RequestDeserializer();

    @Test
    void decodesSingleObjectEncodedRequests() throws Exception {
        GenerateRequest request = TestRequests.request("r1", 1);
        Either<ErrorEvent, GenerateRequest> out = decode("r1", bytes(request));
        assertThat(out.isRight()).isTrue();
        assertThat(out.right()).isEqualTo(request);
    }

    @Test
    void undecodableRecordsBecome400NamedByTheKey() throws Exception {
        byte[] valid = bytes(TestRequests.request("r2", 2));
        List<byte[]> corpus = List.of(
                "not avro at all".getBytes(StandardCharsets.UTF_8),
                new byte[0],
                Arrays.copyOf(valid, valid.length / 2),              // truncated: fields missing
                Arrays.copyOf(valid, 10));                            // header only
        for (byte[] value : corpus) {
            Either<ErrorEvent, GenerateRequest> out = decode("r2", value);
            assertThat(out.isLeft()).as("decoding %s", Arrays.toString(value)).isTrue();
            assertThat(out.left().getRequestId()).isEqualTo("r2");
            assertThat(out.left().getCode()).isEqualTo(400);
            assertThat(out.left().getMessage()).startsWith("undecodable request");
        }
        assertThat(decode(null, "junk".getBytes(StandardCharsets.UTF_8)).left().getRequestId()).isNull();
        assertThat(decode("r3", null).left().getMessage()).isEqualTo("request record has no value");
    }

    @Test
    void decodesRequestsOfTheSchemaBeforeStructuredOutput() throws Exception {
        org.apache.avro.Schema previous;
        try (java.io.InputStream in = GenerateRequest.class.getResourceAsStream("previous/GenerateRequest-1.avsc")) {
            previous = new org.apache.avro.Schema.Parser().parse(in);
        }
        org.apache.avro.generic.GenericRecord old = new org.apache.avro.generic.GenericRecordBuilder(previous)
                .set("request_id", "old").set("prompt", "hi").build();
        byte[] value = new org.apache.avro.message.BinaryMessageEncoder<org.apache.avro.generic.GenericRecord>(
                org.apache.avro.generic.GenericData.get(), previous).encode(old).array();
        Either<ErrorEvent, GenerateRequest> out = decode("old", value);
        assertThat(out.isRight()).as("%s", out).isTrue();
        assertThat(out.right().getPrompt()).isEqualTo("hi");
        assertThat(out.right().getJsonSchema()).isNull();
        assertThat(out.right().getChoices()).isNull();
    }

    @Test
    void emptyRequestIdIsRejected() throws Exception {
        GenerateRequest request = TestRequests.request("", 1);
        assertThat(decode("k", bytes(request)).left().getMessage()).startsWith("request_id:");
    }

    /** A client built before GenerateRequest had messages: its records name the older schema's fingerprint. */
    @Test
    void requestsOfTheSchemaBeforeMessagesStillDecode() throws Exception {
        GenerateRequest now = TestRequests.request("old-client", 3);
        Either<ErrorEvent, GenerateRequest> out = decode("old-client", encodedWithout(now, "messages", "audio", "adapter"));
        assertThat(out.isRight()).as("%s", out).isTrue();
        assertThat(out.right()).isEqualTo(now);
        assertThat(out.right().getMessages()).isNull();
    }

    @Test
    void requestsOfTheSchemaBeforeAudioStillDecode() throws Exception {
        GenerateRequest now = TestRequests.request("pre-audio-client", 3);
        Either<ErrorEvent, GenerateRequest> out = decode("pre-audio-client", encodedWithout(now, "audio", "adapter"));
        assertThat(out.isRight()).as("%s", out).isTrue();
        assertThat(out.right()).isEqualTo(now);
        assertThat(out.right().getAudio()).isNull();
    }

    @Test
    void requestsOfTheSchemaBeforeAdaptersStillDecode() throws Exception {
        GenerateRequest now = TestRequests.request("pre-adapter-client", 3);
        Either<ErrorEvent, GenerateRequest> out = decode("pre-adapter-client", encodedWithout(now, "adapter"));
        assertThat(out.isRight()).as("%s", out).isTrue();
        assertThat(out.right()).isEqualTo(now);
        assertThat(out.right().getAdapter()).isNull();
    }

    @Test
    void anAdapterTravelsWithTheRequest() throws Exception {
        GenerateRequest request = TestRequests.request("with-adapter", 3);
        request.setAdapter("support-bot");
        assertThat(decode("with-adapter", bytes(request)).right().getAdapter()).isEqualTo("support-bot");
    }

    /** {@code request} as a client whose schema lacks the {@code dropped} fields (the newest ones) writes it. */
    private static byte[] encodedWithout(GenerateRequest request, String... dropped) throws Exception {
        Schema current = GenerateRequest.getClassSchema();
        List<Schema.Field> fields = new ArrayList<>();
        for (Schema.Field f : current.getFields()) {
            if (!List.of(dropped).contains(f.name())) {
                fields.add(new Schema.Field(f, f.schema()));
            }
        }
        Schema before = Schema.createRecord(current.getName(), "older doc", current.getNamespace(), false, fields);
        GenericRecord old = new GenericData.Record(before);
        for (Schema.Field f : before.getFields()) {
            old.put(f.name(), request.get(f.name()));
        }
        ByteBuffer encoded = new BinaryMessageEncoder<GenericRecord>(GenericData.get(), before).encode(old);
        byte[] value = new byte[encoded.remaining()];
        encoded.get(value);
        return value;
    }

    private static byte[] bytes(GenerateRequest request) throws Exception {
        ByteBuffer b = request.toByteBuffer();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    private Either<ErrorEvent, GenerateRequest> decode(String key, byte[] value) {
        List<Either<ErrorEvent, GenerateRequest>> out = new ArrayList<>();
        deserializer.deserialize(new ConsumerRecord<>("requests", 0, 0,
                key == null ? null : key.getBytes(StandardCharsets.UTF_8), value), new Collector<>() {
            @Override
            public void collect(Either<ErrorEvent, GenerateRequest> record) {
                out.add(record);
            }

            @Override
            public void close() {}
        });
        assertThat(out).hasSize(1);
        return out.get(0);
    }
}
