package org.mstar.resources.sampler;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import org.mstar.device.Device;
import org.mstar.device.Tensor;
import org.mstar.resources.Planning;
import org.mstar.resources.Resource;
import org.mstar.resources.ResourceReqConfig;
import org.mstar.resources.ResourceStep;
import org.mstar.resources.SamplerSpec;
import org.mstar.resources.SamplerStep;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.StepContext;
import org.mstar.resources.constraint.AllowedTokens;
import org.mstar.resources.constraint.TokenAutomaton;

/**
 * Token sampling with per-request parameters (spec §7).
 *
 * <p>Per request it keeps a {@link SamplingReqConfig} (validated against this node's {@link SamplerSpec}
 * at ingest), the tokens its repetition penalty has seen, and how many tokens it has generated. That count
 * is the Philox offset of its next draw and the seed is the request's own, so a request's tokens depend on
 * (seed, position) and never on which requests share its batch or in what order.
 *
 * <p>A step: {@link #plan} adds the step's prompt tokens ({@code SamplerStep.prefillTrackedTokens}) to the
 * seen sets of requests that penalise their prompt; the forward calls {@link #sample}; {@link #commit}
 * accepts the drawn token of every kept row (seen set, generated count and offset advance once). A
 * caller that keeps tokens outside a runner commit uses {@link #accept} instead.
 *
 * <p>A request may be {@link #constrain constrained} (structured output): each draw then masks the tokens its
 * automaton does not allow in its current state, and each accepted token moves it on. The next state's mask is
 * computed on another thread as soon as the token is accepted, while the next step's forward runs.
 *
 * <p>Any request may also have {@link #suppress suppressed tokens}, which its draws never take, and tokens only its
 * next draw may not take ({@link #suppressNext}): both are masked like a constraint's disallowed tokens.
 *
 * <p>Not thread-safe: one step loop drives it.
 */
public final class SamplerResource implements Resource, Planning<Object> {
    private final SamplerSpec spec;
    private final Device device;
    private final Map<String, SamplingState> requests = new HashMap<>();
    /** The step being run: its penalty and filter switches apply to {@link #sample}. */
    private SamplerStep planned;
    /** Tokens drawn in this step and not yet accepted, by request. */
    private final Map<String, Integer> drawn = new LinkedHashMap<>();
    /** Constrained requests' positions in their automata. */
    private final Map<String, ConstraintCursor> constraints = new HashMap<>();
    /** Token ids a request's every draw leaves out (e.g. Whisper's suppress_tokens), by request. */
    private final Map<String, int[]> suppressed = new HashMap<>();
    /** Token ids only a request's next draw leaves out, dropped when a token is accepted, by request. */
    private final Map<String, int[]> suppressedNext = new HashMap<>();
    /** Where the mask of a constrained request's next state is computed. */
    private final Executor maskExecutor = ForkJoinPool.commonPool();

    /**
     * @param spec   the node's sampler capabilities; its resource key also salts every request's seed
     * @param device where sampling runs
     */
    public SamplerResource(SamplerSpec spec, Device device) {
        this.spec = spec;
        this.device = device;
    }

    /**
     * The Philox key of one request's stream in sampler {@code resourceKey}: the first 8 bytes
     * (little-endian) of SHA-256 over {@code "<seed>:<resourceKey>"}, masked to 63 bits. Salting with the
     * key gives each sampler of a request (e.g. several heads of one model) its own stream. It plays the
     * role of the reference's blake2b derivation but does not reproduce its values.
     */
    public static long deriveSeed(long seed, String resourceKey) {
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256")
                    .digest((seed + ":" + resourceKey).getBytes(StandardCharsets.UTF_8));
            return ByteBuffer.wrap(digest, 0, Long.BYTES).order(ByteOrder.LITTLE_ENDIAN).getLong() & Long.MAX_VALUE;
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK provides SHA-256", e);
        }
    }

    // ---------------------------------------------------------------- requests

    /**
     * Registers {@code rid} with {@code cfg} (null: the defaults). A second ingest keeps the first
     * registration and its progress.
     *
     * @throws org.mstar.resources.RequestValidationException (a 400) naming the field, for a value out of
     *         range or a capability this node's spec lacks
     */
    @Override
    public void ingestRequest(String rid, ResourceReqConfig cfg) {
        SamplingReqConfig config;
        if (cfg == null) {
            config = SamplingReqConfig.DEFAULTS;
        } else if (cfg instanceof SamplingReqConfig c) {
            config = c;
        } else {
            throw new IllegalArgumentException("sampler '" + spec.resourceKey() + "' takes a SamplingReqConfig, got "
                    + cfg.getClass().getName());
        }
        config.validate(spec);
        requests.putIfAbsent(rid, new SamplingState(config, deriveSeed(config.seed(), spec.resourceKey())));
    }

    /** Forgets what {@code rid} has seen and generated (offset back to 0); its parameters stay. */
    @Override
    public void resetRequest(String rid, boolean free) {
        SamplingState s = requests.get(rid);
        if (s != null) {
            s.reset();
        }
        ConstraintCursor c = constraints.get(rid);
        if (c != null) {
            c.reset();
        }
        drawn.remove(rid);
        suppressedNext.remove(rid);
    }

    @Override
    public void removeRequest(String rid) {
        requests.remove(rid);
        constraints.remove(rid);
        drawn.remove(rid);
        suppressed.remove(rid);
        suppressedNext.remove(rid);
    }

    /**
     * Token ids {@code rid}'s draws never take from now on, replacing any earlier ones (an empty array: none).
     * Ids outside the vocabulary are ignored.
     */
    public void suppress(String rid, int[] ids) {
        state(rid);
        if (ids.length == 0) {
            suppressed.remove(rid);
        } else {
            suppressed.put(rid, ids.clone());
        }
    }

    /**
     * Token ids only {@code rid}'s next draw may not take, on top of {@link #suppress}'s (replacing earlier ones not
     * yet used): they apply until a token of {@code rid} is accepted. Ids outside the vocabulary are ignored.
     */
    public void suppressNext(String rid, int[] ids) {
        state(rid);
        suppressedNext.put(rid, ids.clone());
    }

    /**
     * Constrains {@code rid}'s output to {@code automaton}, from its start state (replacing any earlier
     * constraint): from now on each draw allows only the tokens the automaton allows. Before {@link #restore},
     * which then replays the generated tokens through it.
     */
    public void constrain(String rid, TokenAutomaton automaton) {
        state(rid);
        constraints.put(rid, new ConstraintCursor(automaton));
    }

    /** Whether {@code rid} is constrained and its output is complete: its automaton allows nothing more. */
    public boolean constraintComplete(String rid) {
        ConstraintCursor c = constraints.get(rid);
        return c != null && c.complete();
    }

    /**
     * Extra ids (e.g. the tokenizer's EOS and the request's stop tokens) held back, with the spec's
     * {@code minTokensStopIds}, until {@code rid} has generated {@code minTokens} tokens. Replaces any
     * earlier extra ids.
     */
    public void setStopIds(String rid, int[] ids) {
        state(rid).setExtraStopIds(ids);
    }

    /**
     * Rebuilds the state of a request resumed after a restore, replacing what it had: {@code prompt} enters
     * the seen set if the request penalises its prompt, each of {@code generated} is accepted in order, so
     * the next draw is at offset {@code generated.length} as if the request had never stopped.
     */
    public void restore(String rid, int[] prompt, int[] generated) {
        SamplingState s = state(rid);
        s.reset();
        s.addPrompt(prompt);
        ConstraintCursor c = constraints.get(rid);
        if (c != null) {
            c.reset();
        }
        for (int token : generated) {
            s.accept(token);
            if (c != null) {
                c.replay(token);
            }
        }
        if (c != null) {
            c.prefetch(maskExecutor);
        }
        drawn.remove(rid);
    }

    /** Tokens {@code rid} has generated: also the Philox offset of its next draw. */
    public long generated(String rid) {
        return state(rid).generated();
    }

    // ---------------------------------------------------------------- step cycle

    /** Records the step's switches and, on the real plan, adds its prompt tokens to the seen sets. */
    @Override
    public Object plan(ResourceStep step, StepContext ctx) {
        SamplerStep ss = samplerStep(step);
        planned = ss;
        drawn.clear();
        if (!ctx.isPreplan()) {
            ss.prefillTrackedTokens().forEach((rid, tokens) -> {
                SamplingState s = requests.get(rid);
                if (s != null) {
                    s.addPrompt(tokens);
                }
            });
        }
        return null;
    }

    /**
     * Draws one token per row of {@code logits} (F32 {@code [rids.size(), vocab]}), row r for request
     * {@code rids.get(r)}, with the planned step's penalty and filter switches (both on when no step was
     * planned). A greedy row (temperature 0) returns the argmax after the penalty. Rows of ids the sampler
     * does not know (capture padding) draw with the defaults and leave no state.
     *
     * <p>Nothing is accepted yet: {@link #commit} (or {@link #accept}) does that for kept rows.
     *
     * @return the token of each row
     */
    public int[] sample(List<String> rids, Tensor logits) {
        try (PendingDraw draw = launchSample(rids, logits)) {
            return draw.tokens();
        }
    }

    /**
     * {@link #sample}, returning once the draw is enqueued: the tokens stay on the device until
     * {@link PendingDraw#tokens} waits for them, and {@link #commit} accepts them only after that. The rows'
     * parameters (seed offsets, seen sets, constraint states) are read now, so every token a row's request drew
     * before must be committed first.
     */
    public PendingDraw launchSample(List<String> rids, Tensor logits) {
        if (logits.dim(0) != rids.size()) {
            throw new IllegalArgumentException("logits have " + logits.dim(0) + " rows for " + rids.size() + " requests");
        }
        if (rids.isEmpty()) {
            return new PendingDraw(this, List.of(), List.of(), null, null);
        }
        List<SamplingState> states = new ArrayList<>(rids.size());
        List<ConstraintCursor> cursors = new ArrayList<>(rids.size());
        Set<String> known = new HashSet<>();
        for (String rid : rids) {
            SamplingState s = requests.get(rid);
            if (s != null && !known.add(rid)) {
                // one request, one offset: a second row would repeat the first row's random draw
                throw new IllegalArgumentException("request '" + rid + "' appears twice in one sample call");
            }
            states.add(s);
            cursors.add(s == null ? null : constraints.get(rid));
        }
        boolean applyPenalty = planned == null || planned.applyPenalty();
        boolean applyFilters = planned == null || planned.applyFilters();
        SamplingRows rows = new SamplingRows(states, spec.minTokensStopIds(), applyPenalty, (int) logits.dim(-1));
        int vocab = (int) logits.dim(-1);
        Tensor tokens = rows.draw(device, logits, applyFilters, suppress(allowedTokens(cursors, rids, vocab), rids, vocab));
        return new PendingDraw(this, List.copyOf(rids), states, tokens, device.readIntsLater(tokens));
    }

    /** A draw's tokens reached the host: the rows whose request is tracked as it was at the draw await the commit. */
    void drawn(List<String> rids, List<SamplingState> states, int[] tokens) {
        for (int r = 0; r < tokens.length; r++) {
            SamplingState s = states.get(r);
            if (s != null && requests.get(rids.get(r)) == s) {
                drawn.put(rids.get(r), tokens[r]);
            }
        }
    }

    /** Accepts the drawn token of each kept row ({@code SamplerStep.keptRids}, null = all); drops the rest. */
    @Override
    public void commit(ResourceStep step, StepContext ctx) {
        SamplerStep ss = samplerStep(step);
        drawn.forEach((rid, token) -> {
            // a replay's padding row leaves no state; during capture the dummy rows are the batch
            if (ss.kept(rid) && (ctx.capture() || ctx.isRealRow(rid))) {
                acceptInto(rid, token);
            }
        });
        drawn.clear();
        if (planned == ss) {
            planned = null; // not when the next step is already planned (its forward launched ahead of this commit)
        }
    }

    /**
     * Keeps {@code token} as {@code rid}'s next generated token: it enters the penalty's seen set and the
     * offset advances by one. Any token drawn for {@code rid} in this step and not yet committed is dropped,
     * so a later {@link #commit} does not accept that draw again (accepting after the commit would).
     */
    public void accept(String rid, int token) {
        state(rid);
        acceptInto(rid, token);
        drawn.remove(rid);
    }

    private void acceptInto(String rid, int token) {
        requests.get(rid).accept(token);
        suppressedNext.remove(rid);
        ConstraintCursor c = constraints.get(rid);
        if (c != null) {
            c.accept(token, maskExecutor);
        }
    }

    // ---------------------------------------------------------------- internals

    /** The draw's allowed-token bitmask, or null when no row is constrained. */
    private static int[] allowedTokens(List<ConstraintCursor> cursors, List<String> rids, int vocab) {
        if (cursors.stream().allMatch(c -> c == null)) {
            return null;
        }
        List<TokenAutomaton> automata = new ArrayList<>(cursors.size());
        int[] states = new int[cursors.size()];
        for (int r = 0; r < cursors.size(); r++) {
            ConstraintCursor c = cursors.get(r);
            automata.add(c == null ? null : c.automaton());
            states[r] = c == null ? 0 : c.state();
        }
        return AllowedTokens.bitmask(automata, states, rids, vocab);
    }

    /**
     * {@code allowed} (null: everything allowed) with each row's suppressed tokens cleared; null when nothing is
     * constrained or suppressed.
     */
    private int[] suppress(int[] allowed, List<String> rids, int vocab) {
        if (suppressed.isEmpty() && suppressedNext.isEmpty()) {
            return allowed;
        }
        int words = (vocab + 31) >>> 5;
        int[] bits = allowed;
        for (int r = 0; r < rids.size(); r++) {
            for (int[] ids : new int[][] {suppressed.get(rids.get(r)), suppressedNext.get(rids.get(r))}) {
                if (ids == null) {
                    continue;
                }
                if (bits == null) {
                    bits = new int[rids.size() * words];
                    Arrays.fill(bits, -1);
                }
                for (int id : ids) {
                    if (id >= 0 && id < vocab) {
                        bits[r * words + (id >>> 5)] &= ~(1 << (id & 31));
                    }
                }
            }
        }
        return bits;
    }

    private SamplingState state(String rid) {
        SamplingState s = requests.get(rid);
        if (s == null) {
            throw new IllegalStateException("request '" + rid + "' is not ingested in sampler '"
                    + spec.resourceKey() + "'");
        }
        return s;
    }

    private static SamplerStep samplerStep(ResourceStep step) {
        if (step instanceof SamplerStep ss) {
            return ss;
        }
        throw new IllegalArgumentException("the sampler needs a SamplerStep, got "
                + (step == null ? "null" : step.getClass().getName()));
    }
}
