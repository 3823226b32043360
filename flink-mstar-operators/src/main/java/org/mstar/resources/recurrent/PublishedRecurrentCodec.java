package org.mstar.resources.recurrent;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.List;
import org.mstar.resources.PublishedInfoCodec;
import org.mstar.resources.RecurrentLayer;
import org.mstar.resources.RecurrentStateSpec;
import org.mstar.resources.WireFormat;

/**
 * {@link PublishedRecurrentState} as bytes, with the layout it was cut for so that a receiver of another geometry
 * refuses it rather than reading a state of other shapes.
 *
 * <p>Wire format, little-endian:
 * <pre>
 *   int    magic "RSH1" (0x31485352)
 *   int    n, the recurrent layers
 *   n x { int layer; int heads; int headDim; int stateDim; int convDim; int convKernel }   in declared order
 *   string ssm dtype name; string conv dtype name              int byte count, UTF-8
 *   int    tokens                                              the state is the one after them
 *   int    byte count, then the state                          per layer: SSM state, then convolution window
 * </pre>
 */
public final class PublishedRecurrentCodec implements PublishedInfoCodec<PublishedRecurrentState> {
    private static final int MAGIC = 0x31485352;

    private final RecurrentStateSpec spec;

    public PublishedRecurrentCodec(RecurrentStateSpec spec) {
        this.spec = spec;
    }

    @Override
    public Class<PublishedRecurrentState> type() {
        return PublishedRecurrentState.class;
    }

    /** @throws IllegalArgumentException when the state is not this layout's size */
    @Override
    public ByteBuffer encode(PublishedRecurrentState info) {
        byte[] state = info.bytes();
        checkSize(state.length);
        List<RecurrentLayer> layers = spec.layers();
        String ssm = spec.ssmDType().name();
        String conv = spec.convDType().name();
        long size = 4 + 4 + 24L * layers.size() + WireFormat.stringSize(ssm) + WireFormat.stringSize(conv) + 8
                + state.length;
        ByteBuffer b = WireFormat.allocate(Math.toIntExact(size), MAGIC).putInt(layers.size());
        for (RecurrentLayer l : layers) {
            b.putInt(l.layer()).putInt(l.heads()).putInt(l.headDim()).putInt(l.stateDim()).putInt(l.convDim())
                    .putInt(l.convKernel());
        }
        WireFormat.putString(b, ssm);
        WireFormat.putString(b, conv);
        return b.putInt(info.tokens()).putInt(state.length).put(state).flip();
    }

    @Override
    public PublishedRecurrentState decode(ByteBuffer bytes) {
        return WireFormat.decode(bytes, MAGIC, "PublishedRecurrentState", b -> {
            int n = b.getInt();
            if (n < 0 || (long) n * 24 > b.remaining()) {
                throw new BufferUnderflowException();
            }
            RecurrentLayer[] layers = new RecurrentLayer[n];
            for (int i = 0; i < n; i++) {
                layers[i] = new RecurrentLayer(b.getInt(), b.getInt(), b.getInt(), b.getInt(), b.getInt(),
                        b.getInt());
            }
            String ssm = WireFormat.getString(b);
            String conv = WireFormat.getString(b);
            if (!List.of(layers).equals(spec.layers()) || !ssm.equals(spec.ssmDType().name())
                    || !conv.equals(spec.convDType().name())) {
                throw new IllegalArgumentException("a recurrent state of layers " + List.of(layers) + " (ssm " + ssm
                        + ", conv " + conv + ") does not match this resource's " + spec.layers() + " (ssm "
                        + spec.ssmDType() + ", conv " + spec.convDType() + ")");
            }
            int tokens = b.getInt();
            int length = b.getInt();
            if (length < 0 || length > b.remaining()) {
                throw new BufferUnderflowException();
            }
            checkSize(length);
            byte[] state = new byte[length];
            b.get(state);
            if (b.hasRemaining()) {
                throw new IllegalArgumentException(b.remaining() + " bytes past the recurrent state");
            }
            return new PublishedRecurrentState(tokens, state);
        });
    }

    private void checkSize(int length) {
        if (length != spec.stateBytes()) {
            throw new IllegalArgumentException("a recurrent state of " + length + " bytes, this layout's has "
                    + spec.stateBytes());
        }
    }
}
