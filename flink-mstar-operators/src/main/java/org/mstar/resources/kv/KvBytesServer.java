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
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The prefill side of a hand-off between processes: a finished prompt's KV bytes wait here under an id until the
 * decode side pulls them over TCP ({@link #pull}); only a ticket naming them ({@link KvBytesTicket}) travels through
 * Flink. The bytes leave on their first pull. Bytes never pulled (a duplicate the decode side dropped, a ticket lost
 * with a failover) are dropped oldest first once the bytes held pass a bound; a pull that finds nothing, or bytes
 * that arrive cut short or with another checksum, fails with {@link KvBytesGone} and the decode side recomputes.
 * One server per process serves all its prefill engines, a thread per connection. A pull from a server of the
 * puller's own process (prefill and decode engines on two devices of one TaskManager) takes the buffer without a
 * socket: the KV goes device → host → device.
 *
 * <p>Each byte is read from memory as few times as the JDK allows: offering computes nothing (the checksum is no
 * longer in the ticket); the server copies each chunk of the held bytes into a direct buffer of its own, checksums
 * it there while it is in the cache and writes it (a heap buffer written to a socket goes through such a copy anyway);
 * the puller checksums each chunk right after reading it into the array it returns. Both checksums thus ride on
 * copies that the socket needs, on two threads, and a pull is one pass of copies on each side.
 *
 * <p>Protocol, little-endian, one pull per connection: the client sends the server's id (two longs) and the bytes' id
 * (a long); the server answers their length (an int, -1 when it holds no such bytes), the bytes, and their CRC32C
 * (an int), which the client checks against the bytes it received.
 */
public final class KvBytesServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KvBytesServer.class);
    /** Bytes per socket write and read, and per checksum update: small enough to be checksummed in the cache. */
    private static final int CHUNK = 1 << 20;
    /** Socket buffers asked for (the kernel caps them at net.core.wmem_max / rmem_max): a few chunks in flight. */
    private static final int SOCKET_BUFFER = 8 << 20;
    private static final int CONNECT_TIMEOUT_MS = 5_000;
    private static final int READ_TIMEOUT_MS = 30_000;
    /** Each connection thread's chunk, the direct buffer that a socket write of a heap chunk would copy into. */
    private static final ThreadLocal<ByteBuffer> CHUNKS =
            ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(CHUNK));

    /** Pulls of this process that brought their bytes (over TCP or in-process), and those that failed. */
    private static final AtomicLong PULLED = new AtomicLong();
    private static final AtomicLong PULLED_BYTES = new AtomicLong();
    private static final AtomicLong FAILED = new AtomicLong();

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
        long n = ids.incrementAndGet();
        synchronized (held) {
            held.put(n, b);
            heldBytes += b.remaining();
            for (Iterator<ByteBuffer> it = held.values().iterator(); heldBytes > retainedBytes && held.size() > 1; ) {
                heldBytes -= it.next().remaining();
                it.remove();
            }
        }
        return new KvBytesTicket(host, port(), id, n, b.remaining());
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
            c.socket().setSendBufferSize(SOCKET_BUFFER);
            ByteBuffer ask = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
            while (ask.hasRemaining()) {
                if (c.read(ask) < 0) {
                    return;
                }
            }
            ask.flip();
            ByteBuffer bytes = take(new UUID(ask.getLong(), ask.getLong()), ask.getLong());
            writeFully(c, littleEndianInt(bytes == null ? -1 : bytes.remaining()));
            if (bytes != null) {
                ByteBuffer chunk = CHUNKS.get();
                CRC32C crc = new CRC32C();
                for (int at = 0; at < bytes.limit(); at += CHUNK) {
                    chunk.clear().put(bytes.slice(at, Math.min(CHUNK, bytes.limit() - at))).flip();
                    crc.update(chunk.duplicate());
                    writeFully(c, chunk);
                }
                writeFully(c, littleEndianInt((int) crc.getValue()));
            }
        } catch (IOException e) {
            // the puller went away (its TaskManager died or it gave up); nothing to clean up here
        }
    }

    private static ByteBuffer littleEndianInt(int v) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).flip();
    }

    private static void writeFully(SocketChannel c, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    /**
     * The bytes {@code ticket} names, pulled from their server, checked against its length and, over TCP, against the
     * checksum the server sends after them. Each pull is counted ({@link #pullCounts}) and logged.
     *
     * @throws KvBytesGone when the server is unreachable, holds no such bytes, or they arrive cut short or altered
     */
    public static ByteBuffer pull(KvBytesTicket ticket) throws KvBytesGone {
        long t0 = System.nanoTime();
        KvBytesServer local = LOCAL.get(ticket.server());
        try {
            ByteBuffer b = local != null ? inProcess(local, ticket) : overSocket(ticket);
            PULLED.incrementAndGet();
            PULLED_BYTES.addAndGet(b.remaining());
            double ms = (System.nanoTime() - t0) / 1e6;
            LOG.info("Pulled {} ({} bytes) {} in {} ms ({} GB/s)", where(ticket), b.remaining(),
                    local != null ? "in this process" : "over TCP", String.format(Locale.ROOT, "%.1f", ms),
                    String.format(Locale.ROOT, "%.2f", b.remaining() / ms / 1e6));
            return b;
        } catch (KvBytesGone e) {
            FAILED.incrementAndGet();
            throw e;
        }
    }

    /** Pulls of this process so far: those that brought their bytes, their bytes, and those that failed. */
    public record PullCounts(long pulled, long bytes, long failed) {}

    /** What {@link #pull} did in this process so far (a run shows the network path was taken, or why not). */
    public static PullCounts pullCounts() {
        return new PullCounts(PULLED.get(), PULLED_BYTES.get(), FAILED.get());
    }

    private static String where(KvBytesTicket ticket) {
        return "KV bytes " + ticket.id() + " of " + ticket.host() + ":" + ticket.port();
    }

    private static ByteBuffer inProcess(KvBytesServer local, KvBytesTicket ticket) throws KvBytesGone {
        ByteBuffer b = local.take(ticket.server(), ticket.id());
        if (b == null) {
            throw new KvBytesGone(where(ticket) + " are not held there (pulled already or dropped)");
        }
        if (b.remaining() != ticket.length()) {
            throw new KvBytesGone(where(ticket) + " are " + b.remaining() + " bytes, the ticket says "
                    + ticket.length());
        }
        return b;
    }

    /** {@link #pull} over TCP, also from a server of this process (tests and benchmarks of the transport). */
    public static ByteBuffer overSocket(KvBytesTicket ticket) throws KvBytesGone {
        String where = where(ticket);
        try (SocketChannel c = SocketChannel.open()) {
            Socket s = c.socket();
            s.setReceiveBufferSize(SOCKET_BUFFER);
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
            CRC32C crc = new CRC32C();
            for (int at = 0; at < length; ) {
                int n = in.read(bytes, at, Math.min(CHUNK, length - at));
                if (n < 0) {
                    throw new KvBytesGone(where + " cut short at byte " + at + " of " + length);
                }
                crc.update(bytes, at, n); // what the read just wrote, still in the cache
                at += n;
            }
            byte[] sum = in.readNBytes(4);
            if (sum.length < 4) {
                throw new KvBytesGone(where + " cut short before their checksum");
            }
            if (ByteBuffer.wrap(sum).order(ByteOrder.LITTLE_ENDIAN).getInt() != (int) crc.getValue()) {
                throw new KvBytesGone(where + " arrived with another checksum than the server sent");
            }
            return ByteBuffer.wrap(bytes);
        } catch (IOException e) {
            throw new KvBytesGone(where + " could not be pulled: " + e, e);
        }
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
