package org.mstar.engine;

import java.util.Map;
import org.mstar.device.DType;
import org.mstar.engine.llama.LlamaRunner;
import org.mstar.model.GenerationConfig;
import org.mstar.model.chat.ChatTemplate;
import org.mstar.model.llama.LlamaModel;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.resources.kv.KvBytesServer;
import org.mstar.resources.kv.KvShelf;
import org.mstar.resources.runner.StepRunner;

/**
 * Serves a {@link LlamaModel} with continuous batching: the engine loop ({@link EngineCore}, which documents
 * scheduling, preemption, fault isolation, decode graphs, pre-planning, launch-ahead and disaggregation) over the
 * model's {@link LlamaRunner}. This class is what loaders, operators and harnesses hold.
 */
public final class LlamaEngine extends CoreFacade {

    /**
     * @param tokenizer null when requests always carry token ids (text deltas are then empty)
     * @param kvDType element type of the KV pages
     */
    public LlamaEngine(LlamaModel model, TextTokenizer tokenizer, GenerationConfig generation, EngineOptions options,
                       DType kvDType) {
        super(new EngineCore(new LlamaRunner(model, options.adapters()), tokenizer, generation, options, kvDType));
    }

    /** Render the messages of requests that send a conversation with {@code template} (the model folder's). */
    public void useChatTemplate(ChatTemplate template) {
        core.useChatTemplate(template);
    }

    /** For checks and harnesses: decode steps launched before the step before them was accepted. */
    public long launchedAhead() {
        return core.launchedAhead();
    }

    /** For checks and harnesses: decode steps planned ahead, and how many were promoted or dropped. */
    public PreplanCounts preplanCounts() {
        return core.preplanCounts();
    }

    /** For harnesses: per recorded decode bucket, the device bytes its graph keeps allocated (empty without graphs). */
    public Map<Integer, Long> decodeGraphBytes() {
        return core.decodeGraphBytes();
    }

    /** Page bytes this (decode) engine copied from prefill hand-offs through the host; 0 for a colocated one. */
    public long handoffBytesCopied() {
        return core.handoffBytesCopied();
    }

    /** Page bytes this (decode) engine copied on its device from pages a prefill engine there lent; see below. */
    public long handoffLentBytesCopied() {
        return core.handoffLentBytesCopied();
    }

    /**
     * Hand off by handle with the engines of this process: a prefill engine lends its pages through {@code shelf}
     * and sends a ticket; a decode engine claims tickets and copies the pages device to device (pool to pool on one
     * device; onto its own from another device of the process, by that device alone), never through the host,
     * recomputing a request whose pages were taken back. Prefill and decode engines must share the process's
     * shelf; call before the first request.
     *
     * @throws UnsupportedOperationException for a colocated engine
     */
    public void lendOnDevice(KvShelf shelf) {
        core.lendOnDevice(shelf);
    }

    /**
     * Hand off by ticket between processes: a prefill engine offers each hand-off's KV bytes (device→host, as a
     * page-carrying hand-off) on {@code server} and sends a ticket; a decode engine pulls a ticket's bytes from the
     * server it names over TCP, checks them, copies the pages its prefix cache lacks host→device, and recomputes a
     * request whose bytes cannot be pulled (the prefill process died, they were dropped, or they arrive altered).
     * Not together with {@link #lendOnDevice}; call before the first request.
     *
     * @throws UnsupportedOperationException for a colocated engine
     */
    public void handOffOverNetwork(KvBytesServer server) {
        core.handOffOverNetwork(server);
    }

    /** For sizing: device bytes of the adapter slots, allocated with the engine; 0 without adapters. */
    long adapterPoolBytes() {
        return core.adapterPoolBytes();
    }

    /** For sizing: an adapter this engine serves, to record its decode graphs' adapter variant; null if none. */
    String anyAdapter() {
        return core.anyAdapter();
    }

    /** For tests: steps that reused the pre-planned step's declaration (0 without pre-planning). */
    long reusedDeclarations() {
        return core.reusedDeclarations();
    }

    /** The runner, for tests that check resource invariants. */
    StepRunner runner() {
        return core.runner();
    }
}
