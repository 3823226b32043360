package org.mstar.bench;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.avro.specific.SpecificDatumReader;
import org.apache.avro.specific.SpecificDatumWriter;
import org.mstar.device.DType;
import org.mstar.engine.PrefillHandoff;
import org.mstar.flink.HandoffRecords;
import org.mstar.schemas.GenerateRequest;
import org.mstar.schemas.KvHandoff;

/**
 * The host side of a prefill hand-off, stage by stage, for the KV of a Llama-3-8B-shaped model (32 layers, 8 KV
 * heads of 128, bf16, pages of 16 tokens): cutting its page bytes into records, Avro binary encoding of the records
 * (what Flink's Avro serializer writes to the network), decoding them, and reassembling the state. Device copies and the network are not in it. Prints GB/s per stage (KV bytes / time).
 *
 * <pre>java -cp tools/target/benchmarks.jar org.mstar.bench.HandoffBench [promptTokens] [recordKiB]</pre>
 */
public final class HandoffBench {
    private static final int LAYERS = 32;
    private static final int KV_HEADS = 8;
    private static final int HEAD_DIM = 128;
    private static final int PAGE = 16;

    private HandoffBench() {}

    public static void main(String[] args) throws Exception {
        int tokens = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
        int recordBytes = (args.length > 1 ? Integer.parseInt(args[1]) : 1024) * 1024;
        int pages = (tokens + PAGE - 1) / PAGE;
        byte[] kv = new byte[LAYERS * pages * 2 * PAGE * KV_HEADS * HEAD_DIM * DType.BF16.bytes()];
        new Random(1).nextBytes(kv);
        PrefillHandoff h = new PrefillHandoff("r", new int[tokens], new int[] {7}, Map.of("kv", ByteBuffer.wrap(kv)));
        GenerateRequest request = GenerateRequest.newBuilder().setRequestId("r").setPrompt("p").build();
        SpecificDatumWriter<KvHandoff> writer = new SpecificDatumWriter<>(KvHandoff.class);
        SpecificDatumReader<KvHandoff> reader = new SpecificDatumReader<>(KvHandoff.class);
        System.out.printf("%d tokens, %.1f MiB of KV, records of %d KiB%n", tokens, kv.length / 1048576.0,
                recordBytes / 1024);
        System.out.printf("%-6s %8s %16s %14s %14s %14s%n", "round", "records", "split GB/s", "encode GB/s",
                "decode GB/s", "assemble GB/s");
        for (int round = 0; round < 6; round++) { // the first rounds warm the JIT
            long t0 = System.nanoTime();
            List<KvHandoff> records = HandoffRecords.split(h, request, recordBytes, 0);
            long t1 = System.nanoTime();
            List<byte[]> wire = new ArrayList<>(records.size());
            ByteArrayOutputStream buf = new ByteArrayOutputStream(recordBytes + 4096);
            BinaryEncoder enc = null;
            for (KvHandoff r : records) {
                buf.reset();
                enc = EncoderFactory.get().binaryEncoder(buf, enc);
                writer.write(r, enc);
                enc.flush();
                wire.add(buf.toByteArray());
            }
            long t2 = System.nanoTime();
            Map<Integer, KvHandoff> received = new HashMap<>();
            BinaryDecoder dec = null;
            for (byte[] w : wire) {
                dec = DecoderFactory.get().binaryDecoder(w, dec);
                KvHandoff r = reader.read(null, dec);
                received.put(r.getPart(), r);
            }
            long t3 = System.nanoTime();
            PrefillHandoff back = HandoffRecords.assemble(received);
            long t4 = System.nanoTime();
            if (back.stateBytes() != kv.length) {
                throw new IllegalStateException("reassembled " + back.stateBytes() + " bytes of " + kv.length);
            }
            System.out.printf("%-6d %8d %16.2f %14.2f %14.2f %14.2f%n", round, records.size(), gbps(kv.length, t1 - t0),
                    gbps(kv.length, t2 - t1), gbps(kv.length, t3 - t2), gbps(kv.length, t4 - t3));
        }
    }

    private static double gbps(long bytes, long nanos) {
        return bytes / (double) nanos;
    }
}
