package org.mstar.engine.whisper;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.mstar.device.DType;
import org.mstar.device.DeviceFault;
import org.mstar.device.Tensor;
import org.mstar.engine.EngineStats;
import org.mstar.engine.FinishReason;
import org.mstar.engine.FinishedRequest;
import org.mstar.engine.GenerationEngine;
import org.mstar.engine.GenerationRequest;
import org.mstar.engine.LogitsObserver;
import org.mstar.engine.RequestFailure;
import org.mstar.engine.RequestTimings;
import org.mstar.engine.StepResult;
import org.mstar.engine.TokenOutput;
import org.mstar.model.tokenizer.TextTokenizer;
import org.mstar.model.whisper.TimestampRules;
import org.mstar.model.whisper.WhisperConfig;
import org.mstar.model.whisper.WhisperModel;
import org.mstar.model.whisper.WhisperPrompts;
import org.mstar.resources.FullAdmitOutcome;
import org.mstar.resources.NodeResourceSpec;
import org.mstar.resources.RequestValidationException;
import org.mstar.resources.SamplingReqConfig;
import org.mstar.resources.StepContext;
import org.mstar.resources.SubmoduleStep;
import org.mstar.resources.builders.StandardBuilders;
import org.mstar.resources.kv.KVManager;
import org.mstar.resources.runner.EngineResourceInfo;
import org.mstar.resources.runner.ResourceFactory;
import org.mstar.resources.runner.StepRunner;
import org.mstar.resources.sampler.SamplerResource;

/**
 * Serves a {@link WhisperModel}: speech in ({@link GenerationRequest#audio()}), text out, many requests batched per
 * step. A request is admitted when a batch row and the KV pages of a whole window (its context and every decoder
 * position) are free, so admitted requests never run out of pages. A step encodes the windows of newly admitted
 * requests (packed through ragged attention) and feeds their prompts, and decodes one token of every other request.
 *
 * <p>Decoding follows transformers' Whisper generation: the prompt {@code <|startoftranscript|> <|lang|> <|task|>
 * [<|notimestamps|>]} (an English-only model's has no language or task); without a language, the language token with
 * the largest logit after the start token (once, at the first window); generation_config's suppress_tokens never
 * drawn and its begin_suppress_tokens not as a window's first token; with timestamps, {@link TimestampRules}. Audio
 * longer than 30 seconds is decoded window by window, each prompted with the previous one's tokens after
 * {@code <|startofprev|>}. Without a sampling config a request decodes greedily, as Whisper does.
 *
 * <p>Deterministic: tokens depend only on the audio, the options, the sampling config and the model, so
 * {@link #resume} continues exactly; its earlier tokens are fed back with each window's prompt, not drawn again.
 *
 * <p>A step that throws (other than a {@link DeviceFault}) restarts the windows of its requests, which then run
 * one at a time until the one that throws alone is failed with a 500; the others carry on, their tokens unchanged.
 */
public final class WhisperEngine implements GenerationEngine {
    private enum Output { SAMPLE, DETECT, NONE }

    private final WhisperModel model;
    private final WhisperConfig config;
    private final TextTokenizer tokenizer;
    private final Function<float[], float[]> melFeatures;
    private final WhisperPrompts prompts;
    private final TimestampRules timestampRules;
    private final StepRunner runner;
    private final KVManager kv;
    private final SamplerResource sampler;
    private final NodeResourceSpec samplerSpec;
    private final int maxBatchRows;
    /** Tokens one window may generate; 0: up to the decoder's last position. */
    private final int maxWindowTokens;
    private final int pagesPerRequest;
    private final int usablePages;
    private final Map<String, Transcription> live = new LinkedHashMap<>();
    private final List<AutoCloseable> owned = new ArrayList<>();
    private LogitsObserver logitsObserver;
    private long generatedTokens;

    /**
     * @param tokenizer null when no text is wanted (token ids only)
     * @param melFeatures one window's samples (at most 30 s at 16 kHz) → its log-mel features, frames-major
     *     {@code [melFrames, mels]}, padded to the whole window
     * @param kvDType element type of the KV pages
     */
    public WhisperEngine(WhisperModel model, TextTokenizer tokenizer, Function<float[], float[]> melFeatures,
                         WhisperEngineOptions options, DType kvDType) {
        int pages = options.pages();
        int pageSize = options.pageSize();
        this.model = model;
        this.config = model.config();
        this.tokenizer = tokenizer;
        this.melFeatures = melFeatures;
        this.prompts = new WhisperPrompts(config);
        this.timestampRules = new TimestampRules(config);
        this.maxBatchRows = options.maxBatchRows();
        this.maxWindowTokens = options.maxWindowTokens();
        this.usablePages = pages - 1;
        this.pagesPerRequest = ceilDiv(config.encoderFrames(), pageSize) + ceilDiv(config.maxTargetPositions(), pageSize);
        if (pagesPerRequest > usablePages) {
            throw new IllegalArgumentException(pages + " KV pages of " + pageSize + " tokens cannot hold one request"
                    + " (a window's context and decoder need " + pagesPerRequest + ")");
        }
        List<NodeResourceSpec> specs = model.declareResources(pages, pageSize, List.of(config.eosTokenId()));
        this.samplerSpec = specs.stream().filter(s -> s.resourceKey().equals(WhisperModel.SAMPLER)).findFirst()
                .orElseThrow();
        var built = new ResourceFactory(StandardBuilders.all()).buildAll(specs,
                EngineResourceInfo.singleRank(model.device(), kvDType), Set.of());
        model.bind(built);
        this.runner = new StepRunner(built, Map.of(WhisperModel.NODE, built.keySet()));
        this.kv = model.kv();
        this.sampler = model.sampler();
    }

    private static int ceilDiv(int a, int b) {
        return (a + b - 1) / b;
    }

    // ---------------------------------------------------------------- requests

    @Override
    public void submit(GenerationRequest request) {
        admit(request, new int[0]);
    }

    @Override
    public void resume(GenerationRequest request, int[] generated) {
        admit(request, generated);
    }

    private void admit(GenerationRequest request, int[] generated) {
        if (live.containsKey(request.requestId())) {
            return;
        }
        if (request.audio() == null) {
            throw new RequestValidationException("audio", "a Whisper model transcribes audio; the request has none");
        }
        if (request.promptTokenIds() != null || request.promptText() != null || request.messages() != null) {
            throw new RequestValidationException("prompt", "a Whisper model takes audio, not a text prompt or messages");
        }
        if (request.constraint() != null) {
            throw new RequestValidationException("constraint", "structured output is not supported for transcription");
        }
        int language = prompts.languageToken(request.audio().language());
        int task = prompts.taskToken(request.audio().task());
        sampling(request).validate(samplerSpec);
        List<float[]> windows = WhisperPrompts.windows(request.audio().samples());
        Transcription t = new Transcription(request, windows, language, task, generated.clone(), System.nanoTime());
        if (tokenizer != null) {
            t.detokenizer = tokenizer.detokenizer();
        }
        live.put(t.id(), t);
    }

    /** The request's sampling config; greedy when it has none, as Whisper decodes by default. */
    private static SamplingReqConfig sampling(GenerationRequest request) {
        return request.sampling() == null ? SamplingReqConfig.greedy() : request.sampling();
    }

    @Override
    public void remove(String requestId) {
        if (live.remove(requestId) != null) {
            runner.removeRequest(requestId);
        }
    }

    // ---------------------------------------------------------------- step

    @Override
    public StepResult step() {
        List<TokenOutput> tokens = new ArrayList<>();
        List<FinishedRequest> finished = new ArrayList<>();
        List<RequestFailure> failures = new ArrayList<>();
        admitWaiting();
        List<Transcription> rows = live.values().stream()
                .filter(t -> t.phase != Transcription.Phase.WAITING && t.computed < t.sequence.size()).toList();
        // while a failed step's requests are suspects, they run one at a time, alone
        List<Transcription> suspects = rows.stream().filter(t -> t.suspect).toList();
        if (!suspects.isEmpty()) {
            rows = List.of(suspects.get(0));
        }
        if (rows.isEmpty()) {
            return new StepResult(tokens, finished, failures);
        }
        try {
            run(rows, tokens, finished);
            rows.forEach(t -> t.suspect = false);
        } catch (DeviceFault e) {
            throw e;
        } catch (RuntimeException e) {
            if (rows.size() == 1) {
                failures.add(new RequestFailure(rows.get(0).id(), 500, "transcribing this request failed: " + e));
                remove(rows.get(0).id());
            } else {
                // the step's K/V writes are not committed: each request restarts its window, identically, alone
                rows.forEach(this::restartWindow);
            }
        }
        return new StepResult(tokens, finished, failures);
    }

    /** Frees what {@code t} holds and feeds its window again from the start, encoder included; a suspect now. */
    private void restartWindow(Transcription t) {
        runner.removeRequest(t.id());
        runner.ingestRequest(t.id(), Map.of(WhisperModel.SAMPLER, sampling(t.request)));
        sampler.suppress(t.id(), prompts.suppressAlways());
        sampler.restore(t.id(), new int[0], t.windowTokens());
        t.computed = 0;
        t.phase = Transcription.Phase.ENCODE;
        t.suspect = true;
    }

    /** Opens the first window of waiting requests, in arrival order, while rows and whole-window pages last. */
    private void admitWaiting() {
        int active = (int) live.values().stream().filter(t -> t.phase != Transcription.Phase.WAITING).count();
        for (Transcription t : List.copyOf(live.values())) {
            if (t.phase != Transcription.Phase.WAITING) {
                continue;
            }
            if (active >= maxBatchRows || (active + 1) * pagesPerRequest > usablePages) {
                break;
            }
            active++;
            openWindow(t);
        }
    }

    private void run(List<Transcription> rows, List<TokenOutput> tokens, List<FinishedRequest> finished) {
        Map<String, Integer> spans = new LinkedHashMap<>();
        List<String> encode = new ArrayList<>();
        Output[] kinds = new Output[rows.size()];
        int total = rows.stream().mapToInt(t -> t.sequence.size() - t.computed).sum();
        int[] ids = new int[total];
        int[] positions = new int[total];
        int at = 0;
        List<Integer> sampleRows = new ArrayList<>();
        List<Integer> detectRows = new ArrayList<>();
        List<String> sampleRids = new ArrayList<>();
        for (int r = 0; r < rows.size(); r++) {
            Transcription t = rows.get(r);
            int[] feed = t.pending();
            spans.put(t.id(), feed.length);
            if (t.phase == Transcription.Phase.ENCODE) {
                encode.add(t.id());
            }
            for (int i = 0; i < feed.length; i++) {
                ids[at + i] = feed[i];
                positions[at + i] = t.computed + i;
            }
            at += feed.length;
            kinds[r] = outputOf(t);
            if (kinds[r] == Output.SAMPLE) {
                sampleRows.add(at - 1);
                sampleRids.add(t.id());
            } else if (kinds[r] == Output.DETECT) {
                detectRows.add(at - 1);
            }
        }
        // the windows' features are independent host work: computed side by side
        List<float[]> mels = rows.stream().filter(t -> t.phase == Transcription.Phase.ENCODE).parallel()
                .map(t -> melFeatures.apply(t.windows.get(t.window))).toList();
        SubmoduleStep step = model.declareStep(spans, encode, Set.copyOf(sampleRids));
        step.setCtx(new StepContext(List.copyOf(spans.keySet()), WhisperModel.WALK, 0, false));
        FullAdmitOutcome admitted = runner.admit(step);
        if (!admitted.ok()) {
            throw new IllegalStateException("the step was refused by '" + admitted.failedResource() + "': "
                    + admitted.reason());
        }
        runner.plan(step);
        int[] outputRows = new int[sampleRows.size() + detectRows.size()];
        for (int i = 0; i < sampleRows.size(); i++) {
            outputRows[i] = sampleRows.get(i);
        }
        for (int i = 0; i < detectRows.size(); i++) {
            outputRows[sampleRows.size() + i] = detectRows.get(i);
        }
        int[] drawn;
        int[] detected = new int[detectRows.size()];
        try (Tensor tokenIds = model.device().fromInts(ids, total);
             Tensor posIds = model.device().fromInts(positions, total);
             Tensor logits = model.forward(mels, tokenIds, posIds, outputRows)) {
            float[] host = logitsObserver != null || rows.stream().anyMatch(t -> t.timestamps) || !detectRows.isEmpty()
                    ? model.device().toFloats(logits) : null;
            drawn = draw(rows, kinds, sampleRids, logits, host);
            for (int i = 0; i < detected.length; i++) {
                int v = config.vocabSize();
                detected[i] = prompts.detectLanguage(Arrays.copyOfRange(host, (sampleRids.size() + i) * v,
                        (sampleRids.size() + i + 1) * v));
            }
        }
        runner.commit(step);
        long now = System.nanoTime();
        int s = 0;
        int d = 0;
        for (int r = 0; r < rows.size(); r++) {
            Transcription t = rows.get(r);
            t.computed = t.sequence.size();
            t.phase = Transcription.Phase.DECODE;
            switch (kinds[r]) {
                case SAMPLE -> accept(t, drawn[s++], now, tokens, finished);
                case DETECT -> {
                    t.languageToken = detected[d++];
                    continueWindow(t);
                }
                case NONE -> endWindow(t, finished);
            }
        }
    }

    /** What the row's last fed token yields: the next token, the detected language, or nothing (replayed window). */
    private Output outputOf(Transcription t) {
        if (prompts.detectsLanguage(t.languageToken)) {
            return Output.DETECT;
        }
        return windowComplete(t) ? Output.NONE : Output.SAMPLE;
    }

    /**
     * Draws the sampled rows' tokens: suppressed tokens always, begin-suppressed ones at a window's first position,
     * and the timestamp rules for requests with timestamps (their host logits rows decide).
     */
    private int[] draw(List<Transcription> rows, Output[] kinds, List<String> sampleRids, Tensor logits, float[] host) {
        if (sampleRids.isEmpty()) {
            return new int[0];
        }
        int vocab = config.vocabSize();
        int s = 0;
        for (int r = 0; r < rows.size(); r++) {
            if (kinds[r] != Output.SAMPLE) {
                continue;
            }
            Transcription t = rows.get(r);
            boolean first = t.sequence.size() == t.promptLength;
            int[] begin = first ? prompts.suppressAtBegin() : new int[0];
            float[] row = host == null ? null : Arrays.copyOfRange(host, s * vocab, (s + 1) * vocab);
            if (logitsObserver != null) {
                logitsObserver.onLogits(t.id(), t.output.size(), row.clone());
            }
            if (t.timestamps) {
                for (int id : prompts.suppressAlways()) {
                    row[id] = Float.NEGATIVE_INFINITY;
                }
                for (int id : begin) {
                    row[id] = Float.NEGATIVE_INFINITY;
                }
                boolean[] disallowed = timestampRules.disallowed(t.windowTokens(), row);
                int[] extra = java.util.stream.IntStream.range(0, vocab).filter(i -> disallowed[i]).toArray();
                int[] all = Arrays.copyOf(begin, begin.length + extra.length);
                System.arraycopy(extra, 0, all, begin.length, extra.length);
                sampler.suppressNext(t.id(), all);
            } else if (first) {
                sampler.suppressNext(t.id(), begin);
            }
            s++;
        }
        return sampler.sample(sampleRids, logits.rows(0, sampleRids.size()));
    }

    // ---------------------------------------------------------------- windows

    /**
     * Starts window {@code t.window}: its resources afresh, the prompt's head (up to the start token) and, once the
     * language is known, the rest of the prompt and the window's replayed tokens.
     */
    private void openWindow(Transcription t) {
        runner.removeRequest(t.id());
        runner.ingestRequest(t.id(), Map.of(WhisperModel.SAMPLER, sampling(t.request)));
        sampler.suppress(t.id(), prompts.suppressAlways());
        t.startWindow(prompts.head(t.previousText));
        if (!prompts.detectsLanguage(t.languageToken)) {
            continueWindow(t);
        }
    }

    /** The prompt after the start token, then the tokens of this window an earlier run generated. */
    private void continueWindow(Transcription t) {
        t.extendPrompt(prompts.tail(t.languageToken, t.taskToken, t.timestamps));
        List<Integer> known = new ArrayList<>();
        while (t.replaying() && !windowComplete(t, known.size())) {
            int token = t.nextReplayed();
            known.add(token);
            if (token == config.eosTokenId()) {
                break;
            }
        }
        for (int token : known) {
            t.sequence.add(token);
            t.output.add(token);
            if (t.detokenizer != null) {
                t.detokenizer.push(token);
            }
        }
        sampler.restore(t.id(), new int[0], t.windowTokens());
    }

    private boolean windowComplete(Transcription t) {
        return windowComplete(t, 0);
    }

    /**
     * Whether the window, with {@code more} tokens still to add, ended: by its end token, its last position or the
     * tokens a window may generate.
     */
    private boolean windowComplete(Transcription t, int more) {
        int size = t.sequence.size();
        boolean ended = size > t.promptLength && t.sequence.get(size - 1) == config.eosTokenId();
        boolean full = maxWindowTokens > 0 && size - t.promptLength + more >= maxWindowTokens;
        return ended || full || size + more >= config.maxTargetPositions();
    }

    /** Keeps a drawn token: out as an event, then the window or the request ends, or decoding goes on. */
    private void accept(Transcription t, int token, long now, List<TokenOutput> tokens, List<FinishedRequest> finished) {
        t.sequence.add(token);
        t.output.add(token);
        generatedTokens++;
        if (t.firstTokenNanos < 0) {
            t.firstTokenNanos = now;
        }
        t.lastTokenNanos = now;
        FinishReason finish = null;
        boolean windowDone = windowComplete(t);
        if (t.output.size() >= t.request.maxTokens()) {
            finish = token == config.eosTokenId() && t.lastWindow() ? FinishReason.STOP : FinishReason.LENGTH;
        } else if (windowDone && t.lastWindow()) {
            finish = token == config.eosTokenId() ? FinishReason.STOP : FinishReason.LENGTH;
        }
        String delta = t.detokenizer == null ? "" : t.detokenizer.push(token);
        if (finish != null && t.detokenizer != null) {
            delta += t.detokenizer.finish();
        }
        tokens.add(new TokenOutput(t.id(), t.output.size() - 1, token, delta, finish));
        if (finish != null) {
            finished.add(result(t, finish));
            remove(t.id());
        } else if (windowDone) {
            endWindow(t, finished);
        }
    }

    /** Moves to the next window, prompted with this one's tokens; the last window's end finishes the request. */
    private void endWindow(Transcription t, List<FinishedRequest> finished) {
        if (t.lastWindow()) {
            int last = t.sequence.get(t.sequence.size() - 1);
            finished.add(result(t, last == config.eosTokenId() ? FinishReason.STOP : FinishReason.LENGTH));
            remove(t.id());
            return;
        }
        int[] text = t.windowTokens();
        if (text.length > 0 && text[text.length - 1] == config.eosTokenId()) {
            text = Arrays.copyOf(text, text.length - 1);
        }
        t.previousText = text;
        t.window++;
        openWindow(t);
    }

    private FinishedRequest result(Transcription t, FinishReason finish) {
        int[] ids = t.outputArray();
        String text = tokenizer == null ? "" : tokenizer.decode(ids);
        long ttft = t.firstTokenNanos < 0 ? 0 : t.firstTokenNanos - t.arrivalNanos;
        long itl = t.output.size() < 2 || t.firstTokenNanos < 0 ? 0
                : (t.lastTokenNanos - t.firstTokenNanos) / (t.output.size() - 1);
        long total = t.lastTokenNanos < 0 ? 0 : t.lastTokenNanos - t.arrivalNanos;
        return new FinishedRequest(t.id(), ids, text, finish, t.promptLength, 0, new RequestTimings(0, ttft, itl, total));
    }

    // ---------------------------------------------------------------- state

    @Override
    public boolean hasWork() {
        return !live.isEmpty();
    }

    @Override
    public int waiting() {
        return (int) live.values().stream().filter(t -> t.phase == Transcription.Phase.WAITING).count();
    }

    @Override
    public int maxBatchRows() {
        return maxBatchRows;
    }

    @Override
    public EngineStats stats() {
        int waiting = waiting();
        return new EngineStats(live.size() - waiting, waiting, usablePages - kv.freePages(), usablePages, 0, 0,
                generatedTokens, 0);
    }

    /**
     * For checks and harnesses: {@code observer} sees the raw logits (before any suppression) of every sampled row
     * before it is drawn, indexed by the request's output position; null removes it.
     */
    public void observeLogits(LogitsObserver observer) {
        this.logitsObserver = observer;
    }

    /** Close {@code resource} with this engine (the weights and tokenizer a loader made for it). */
    public void own(AutoCloseable resource) {
        owned.add(resource);
    }

    @Override
    public void close() {
        new ArrayList<>(live.keySet()).forEach(this::remove);
        runner.resources().values().forEach(org.mstar.resources.Resource::cleanup);
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception e) {
                throw new IllegalStateException("closing " + c, e);
            }
        }
    }
}
