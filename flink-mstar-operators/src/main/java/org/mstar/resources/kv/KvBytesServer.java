package org.mstar.resources.kv;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * The prefill side of a hand-off between processes: a finished prompt's KV bytes wait here under an id until the
 * decode side pulls them over TCP ({@link #pull}); only a ticket naming them ({@link KvBytesTicket}) travels through
 * Flink. The bytes leave on their first pull. Bytes never pulled (a duplicate the decode side dropped, a ticket lost
 * with a failover) are dropped oldest first once the bytes held pass a bound; a pull that finds nothing, or bytes
 * that arrive cut short or with another checksum, fails with {@link KvBytesGone} and the decode side recomputes.
 * One server per process serves all its prefill engines, a thread per connection, writing in chunks straight from
 * the buffer the KV was encoded into. A pull from a server of the puller's own process (prefill and decode engines on
 * two devices of one TaskManager) takes the buffer without a socket: the KV goes device → host → device.
 *
 * <p>Protocol, little-endian, one pull per connection: the client sends the server's id (two longs) and the bytes' id
 * (a long); the server answers their length (an int, -1 when it holds no such bytes) and the bytes.
 */
public final class KvBytesServer implements AutoCloseable {
    /** Bytes per socket write and read: large enough for loopback's speed, small for the JDK's direct buffers. */
    private static final int CHUNK = 4 << 20;
    private static final int CONNECT_TIMEOUT_MS = 5_000;
    private static final int READ_TIMEOUT_MS = 30_000;

    /** The servers of this process, for pulls that need no socket. */
    private static final Map<UUID, KvBytesServer> LOCAL = new ConcurrentHashMap<>();

    private final UUID id = UUID.randomUUID();
    private final ServerSocketChannel listener;
    private final String host;
    private final long retainedBytes;
    private final AtomicLong ids = new AtomicLong();
    private final Map<Long, ByteBuffer> held = new LinkedHashMap<>();
    private long heldBytes;
    private final ExecutorService connections = Executors.newCachedThreadPool(r -> daemon(r, "mstar-kv-bytes"));

    private KvBytesServer(ServerSocketChannel listener, String host, long retainedBytes) {
        this.listener = listener;
        this.host = host;
        this.retainedBytes = retainedBytes;
        LOCAL.put(id, this);
        daemon(this::accept, "mstar-kv-bytes-accept").start();
    }

    /**
     * A server listening on {@code host} (any free port), which it names in its tickets.
     *
     * @param retainedBytes most bytes held for pulls not yet made; the newest offer is held whatever its size
     */
    public static KvBytesServer start(String host, long retainedBytes) throws IOException {
        ServerSocketChannel listener = ServerSocketChannel.open();
        try {
            listener.bind(new InetSocketAddress(host, 0), 64);
        } catch (IOException e) {
            listener.close();
            throw e;
        }
        return new KvBytesServer(listener, host, retainedBytes);
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    /** Holds {@code bytes} (its remaining ones, not copied: the caller no longer writes them) for one pull. */
    public KvBytesTicket offer(ByteBuffer bytes) {
        ByteBuffer b = bytes.slice();
        CRC32C crc = new CRC32C();
        crc.update(b.duplicate());
        long n = ids.incrementAndGet();
        synchronized (held) {
            held.put(n, b);
            heldBytes += b.remaining();
            for (Iterator<ByteBuffer> it = held.values().iterator(); heldBytes > retainedBytes && held.size() > 1; ) {
                heldBytes -= it.next().remaining();
                it.remove();
            }
        }
        return new KvBytesTicket(host, port(), id, n, b.remaining(), (int) crc.getValue());
    }

    private ByteBuffer take(UUID server, long n) {
        if (!id.equals(server)) {
            return null;
        }
        synchronized (held) {
            ByteBuffer b = held.remove(n);
            if (b != null) {
                heldBytes -= b.remaining();
            }
            return b;
        }
    }

    /** Offers not pulled (nor dropped) yet. */
    public int held() {
        synchronized (held) {
            return held.size();
        }
    }

    /** The port it listens on. */
    public int port() {
        return listener.socket().getLocalPort();
    }

    private void accept() {
        while (listener.isOpen()) {
            try {
                SocketChannel c = listener.accept();
                connections.execute(() -> serve(c));
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                // one failed accept (out of file descriptors, say); the puller recomputes
            }
        }
    }

    private void serve(SocketChannel c) {
        try (c) {
            ByteBuffer ask = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            while (ask.hasRemaining()) {
                if (c.read(ask) < 0) {
                    return;
                }
            }
            ask.flip();
            ByteBuffer bytes = take(new UUID(ask.getLong(), ask.getLong()), ask.getLong());
            ByteBuffer head = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN)
                    .putInt(bytes == null ? -1 : bytes.remaining()).flip();
            writeFully(c, head);
            if (bytes != null) {
                for (int at = 0; at < bytes.limit(); at += CHUNK) {
                    writeFully(c, bytes.slice(at, Math.min(CHUNK, bytes.limit() - at)));
                }
            }
        } catch (IOException e) {
            // the puller went away (its TaskManager died or it gave up); nothing to clean up here
        }
    }

    private static void writeFully(SocketChannel c, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    /**
     * The bytes {@code ticket} names, pulled from their server, checked against its length and checksum.
     *
     * @throws KvBytesGone when the server is unreachable, holds no such bytes, or they arrive cut short or altered
     */
    public static ByteBuffer pull(KvBytesTicket ticket) throws KvBytesGone {
        String where = "KV bytes " + ticket.id() + " of " + ticket.host() + ":" + ticket.port();
        KvBytesServer local = LOCAL.get(ticket.server());
        if (local != null) {
            ByteBuffer b = local.take(ticket.server(), ticket.id());
            if (b == null) {
                throw new KvBytesGone(where + " are not held there (pulled already or dropped)");
            }
            return checked(where, ticket, b);
        }
        return overSocket(ticket);
    }

    /** {@link #pull} over TCP, also from a server of this process (tests and benchmarks of the transport). */
    public static ByteBuffer overSocket(KvBytesTicket ticket) throws KvBytesGone {
        String where = "KV bytes " + ticket.id() + " of " + ticket.host() + ":" + ticket.port();
        try (SocketChannel c = SocketChannel.open()) {
            Socket s = c.socket();
            s.setReceiveBufferSize(CHUNK);
            s.connect(new InetSocketAddress(ticket.host(), ticket.port()), CONNECT_TIMEOUT_MS);
            s.setSoTimeout(READ_TIMEOUT_MS);
            writeFully(c, ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN)
                    .putLong(ticket.server().getMostSignificantBits())
                    .putLong(ticket.server().getLeastSignificantBits()).putLong(ticket.id()).flip());
            InputStream in = s.getInputStream();
            byte[] head = in.readNBytes(4);
            int length = head.length < 4 ? -2 : ByteBuffer.wrap(head).order(ByteOrder.LITTLE_ENDIAN).getInt();
            if (length == -1) {
                throw new KvBytesGone(where + " are not held there (pulled already, dropped, or another server's)");
            }
            if (length != ticket.length()) {
                throw new KvBytesGone(where + ": " + length + " bytes announced, the ticket says " + ticket.length());
            }
            byte[] bytes = new byte[length];
            for (int at = 0; at < length; ) {
                int n = in.read(bytes, at, Math.min(CHUNK, length - at));
                if (n < 0) {
                    throw new KvBytesGone(where + " cut short at byte " + at + " of " + length);
                }
                at += n;
            }
            return checked(where, ticket, ByteBuffer.wrap(bytes));
        } catch (IOException e) {
            throw new KvBytesGone(where + " could not be pulled: " + e, e);
        }
    }

    private static ByteBuffer checked(String where, KvBytesTicket ticket, ByteBuffer bytes) throws KvBytesGone {
        CRC32C crc = new CRC32C();
        crc.update(bytes.duplicate());
        if (bytes.remaining() != ticket.length() || (int) crc.getValue() != ticket.crc32c()) {
            throw new KvBytesGone(where + " arrived with another length or checksum than the ticket's");
        }
        return bytes;
    }

    /** Stops listening and drops what it holds; pulls under way finish. */
    @Override
    public void close() throws IOException {
        LOCAL.remove(id);
        listener.close();
        connections.shutdown();
        synchronized (held) {
            held.clear();
            heldBytes = 0;
        }
    }
}
