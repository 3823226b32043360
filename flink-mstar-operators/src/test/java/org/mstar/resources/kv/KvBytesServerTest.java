package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The TCP path of a network hand-off: offered bytes come back equal on their one pull, across several socket chunks;
 * a pull that cannot bring them back whole and intact (pulled already, dropped past the bound, another checksum or
 * length, the server closed) fails with {@link KvBytesGone}, on which the decode side recomputes.
 */
class KvBytesServerTest {
    private static final String HOST = "127.0.0.1";

    private static ByteBuffer random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return ByteBuffer.wrap(b);
    }

    @Test
    void aPullBringsTheOfferedBytesOnceAcrossSeveralChunks() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            ByteBuffer bytes = random((9 << 20) + 13, 1); // more than two 4 MiB chunks and a tail
            KvBytesTicket ticket = server.offer(bytes.duplicate());
            assertThat(ticket.length()).isEqualTo(bytes.remaining());
            assertThat(server.held()).isEqualTo(1);
            assertThat(KvBytesServer.overSocket(ticket)).isEqualTo(bytes);
            assertThat(server.held()).isZero();
            assertThatThrownBy(() -> KvBytesServer.overSocket(ticket)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("not held");
        }
    }

    @Test
    void aPullFromAServerOfThisProcessTakesTheBytesWithoutASocketOnce() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            ByteBuffer bytes = random(1000, 10);
            KvBytesTicket ticket = server.offer(bytes.duplicate());
            assertThat(KvBytesServer.pull(ticket)).isEqualTo(bytes);
            assertThatThrownBy(() -> KvBytesServer.pull(ticket)).isInstanceOf(KvBytesGone.class);
            KvBytesTicket altered = server.offer(bytes.duplicate());
            KvBytesTicket other = new KvBytesTicket(altered.host(), altered.port(), altered.server(), altered.id(),
                    altered.length(), altered.crc32c() + 1);
            assertThatThrownBy(() -> KvBytesServer.pull(other)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("checksum");
        }
    }

    @Test
    void aTicketRoundTripsThroughItsWireFormat() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            KvBytesTicket ticket = server.offer(random(100, 2));
            ByteBuffer wire = ticket.put(ByteBuffer.allocate(ticket.size())).flip();
            assertThat(KvBytesTicket.get(wire)).isEqualTo(ticket);
            assertThat(wire.hasRemaining()).isFalse();
        }
    }

    @Test
    void bytesWithAnotherChecksumOrLengthThanTheTicketsAreRefused() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            KvBytesTicket t = server.offer(random(5000, 3));
            KvBytesTicket altered = new KvBytesTicket(t.host(), t.port(), t.server(), t.id(), t.length(),
                    t.crc32c() ^ 1);
            assertThatThrownBy(() -> KvBytesServer.overSocket(altered)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("checksum");
            assertThatThrownBy(() -> KvBytesServer.pull(altered)).as("nor taken in this process")
                    .isInstanceOf(KvBytesGone.class);
            KvBytesTicket u = server.offer(random(5000, 4));
            KvBytesTicket longer = new KvBytesTicket(u.host(), u.port(), u.server(), u.id(), u.length() + 1,
                    u.crc32c());
            assertThatThrownBy(() -> KvBytesServer.overSocket(longer)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("announced");
        }
    }

    @Test
    void anotherServersTicketFindsNothing() throws Exception {
        try (KvBytesServer a = KvBytesServer.start(HOST, 1L << 30);
             KvBytesServer b = KvBytesServer.start(HOST, 1L << 30)) {
            KvBytesTicket t = a.offer(random(10, 5));
            KvBytesTicket toB = new KvBytesTicket(t.host(), b.port(), t.server(), t.id(), t.length(), t.crc32c());
            assertThatThrownBy(() -> KvBytesServer.overSocket(toB)).isInstanceOf(KvBytesGone.class);
            assertThat(KvBytesServer.overSocket(t)).isEqualTo(random(10, 5));
        }
    }

    @Test
    void theOldestOffersAreDroppedPastTheBoundAndTheNewestIsAlwaysHeld() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 100)) {
            KvBytesTicket first = server.offer(random(60, 6));
            KvBytesTicket second = server.offer(random(60, 7));
            assertThat(server.held()).isEqualTo(1);
            assertThatThrownBy(() -> KvBytesServer.overSocket(first)).isInstanceOf(KvBytesGone.class);
            assertThat(KvBytesServer.overSocket(second)).isEqualTo(random(60, 7));
            KvBytesTicket large = server.offer(random(500, 8));
            assertThat(KvBytesServer.overSocket(large)).isEqualTo(random(500, 8));
        }
    }

    @Test
    void aClosedServerAnswersNoPull() throws Exception {
        KvBytesServer server = KvBytesServer.start(HOST, 1L << 30);
        KvBytesTicket t = server.offer(random(1000, 9));
        server.close();
        assertThatThrownBy(() -> KvBytesServer.overSocket(t)).isInstanceOf(KvBytesGone.class)
                .hasMessageContaining("could not be pulled");
    }
}
