package org.mstar.resources.kv;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/**
 * The TCP path of a network hand-off: offered bytes come back equal on their one pull, across several socket chunks;
 * a pull that cannot bring them back whole and intact (pulled already, dropped past the bound, another length, bytes
 * altered on the way so their checksum differs, the server closed) fails with {@link KvBytesGone}, on which the decode
 * side recomputes; the process's pull counts say which happened.
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
            ByteBuffer bytes = random((9 << 20) + 13, 1); // several 1 MiB chunks and a tail
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
    void aPullFromAServerOfThisProcessTakesTheBytesWithoutASocketOnceAndIsCounted() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            ByteBuffer bytes = random(1000, 10);
            KvBytesTicket ticket = server.offer(bytes.duplicate());
            KvBytesServer.PullCounts before = KvBytesServer.pullCounts();
            assertThat(KvBytesServer.pull(ticket)).isEqualTo(bytes);
            assertThatThrownBy(() -> KvBytesServer.pull(ticket)).isInstanceOf(KvBytesGone.class);
            KvBytesTicket altered = server.offer(bytes.duplicate());
            KvBytesTicket longer = new KvBytesTicket(altered.host(), altered.port(), altered.server(), altered.id(),
                    altered.length() + 1);
            assertThatThrownBy(() -> KvBytesServer.pull(longer)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("the ticket says");
            KvBytesServer.PullCounts after = KvBytesServer.pullCounts();
            // other tests of this class may pull meanwhile (when run in parallel), so at least
            assertThat(after.pulled() - before.pulled()).isGreaterThanOrEqualTo(1);
            assertThat(after.bytes() - before.bytes()).isGreaterThanOrEqualTo(1000);
            assertThat(after.failed() - before.failed()).isGreaterThanOrEqualTo(2);
        }
    }

    /**
     * A stand-in server that answers one pull with {@code bytes}, one of them flipped after it checksummed them (or
     * without the checksum): as bytes altered or cut on their way.
     */
    private static KvBytesTicket servedAltered(ServerSocketChannel listener, ByteBuffer bytes, boolean checksum) {
        CompletableFuture.runAsync(() -> {
            try (SocketChannel c = listener.accept()) {
                c.read(ByteBuffer.allocate(24));
                CRC32C crc = new CRC32C();
                crc.update(bytes.duplicate());
                ByteBuffer altered = ByteBuffer.allocate(bytes.remaining()).put(bytes.duplicate()).flip();
                altered.put(7, (byte) (altered.get(7) ^ 1));
                ByteBuffer out = ByteBuffer.allocate(8 + bytes.remaining()).order(ByteOrder.LITTLE_ENDIAN)
                        .putInt(bytes.remaining()).put(altered);
                if (checksum) {
                    out.putInt((int) crc.getValue());
                }
                for (out.flip(); out.hasRemaining(); ) {
                    c.write(out);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        return new KvBytesTicket(HOST, listener.socket().getLocalPort(), UUID.randomUUID(), 1, bytes.remaining());
    }

    @Test
    void bytesAlteredOrCutOnTheWayAreRefused() throws Exception {
        try (ServerSocketChannel listener = ServerSocketChannel.open().bind(new InetSocketAddress(HOST, 0))) {
            ByteBuffer bytes = random(3 << 20, 11);
            assertThatThrownBy(() -> KvBytesServer.overSocket(servedAltered(listener, bytes, true)))
                    .isInstanceOf(KvBytesGone.class).hasMessageContaining("another checksum");
            assertThatThrownBy(() -> KvBytesServer.overSocket(servedAltered(listener, bytes, false)))
                    .isInstanceOf(KvBytesGone.class).hasMessageContaining("cut short before their checksum");
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
    void bytesOfAnotherLengthThanTheTicketsAreRefused() throws Exception {
        try (KvBytesServer server = KvBytesServer.start(HOST, 1L << 30)) {
            KvBytesTicket u = server.offer(random(5000, 4));
            KvBytesTicket longer = new KvBytesTicket(u.host(), u.port(), u.server(), u.id(), u.length() + 1);
            assertThatThrownBy(() -> KvBytesServer.overSocket(longer)).isInstanceOf(KvBytesGone.class)
                    .hasMessageContaining("announced");
        }
    }

    @Test
    void anotherServersTicketFindsNothing() throws Exception {
        try (KvBytesServer a = KvBytesServer.start(HOST, 1L << 30);
             KvBytesServer b = KvBytesServer.start(HOST, 1L << 30)) {
            KvBytesTicket t = a.offer(random(10, 5));
            KvBytesTicket toB = new KvBytesTicket(t.host(), b.port(), t.server(), t.id(), t.length());
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
