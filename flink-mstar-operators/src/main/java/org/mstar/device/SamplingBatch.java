package org.mstar.device;

/**
 * Per-row sampling parameters for {@link ComputeOps#samplingProbs}, as device tensors of {@code rows}
 * entries (F32 unless noted). Row r's meaning follows the sampler spec §7.3:
 *
 * <ol>
 *   <li>penalty: for each token v with {@code penaltyCounts[r, v] = n > 0}, logit l becomes
 *       {@code l > 0 ? l / p^n : l * p^n} with {@code p = repetitionPenalty[r]} (presence form: n ∈ {0,1});</li>
 *   <li>{@code temperature[r] == 0}: one-hot at the argmax (lowest index on ties), taken over the tokens
 *       other than {@code stopIds} when {@code maskStopIds[r] != 0}; else softmax(l / T);</li>
 *   <li>{@code minP[r] > 0}: zero probabilities below {@code minP · max}, renormalise;</li>
 *   <li>filters (when {@code applyFilters}): {@code topPFirst[r] == 0}: top-k ({@code topK[r]}, 0 = off) then
 *       top-p ({@code topP[r]}) over the renormalised top-k set; {@code != 0}: top-p then top-k, each on
 *       the full distribution. Both keep a prefix of the ranked order (descending probability, ties by
 *       lower index): top-k its first k; top-p the shortest prefix whose mass reaches
 *       {@code ceil(topP · pool)}, at least {@code topPMinKeep[r]} tokens, where masses are exact integers
 *       {@code floor(p · 2^40)} and the pool is the mass of the top-k set (top-k first) or of all tokens.
 *       The kept length is {@code min(k, max(top-p prefix, minKeep))}. Renormalise if anything went;</li>
 *   <li>{@code maskStopIds[r] != 0}: probabilities of {@code stopIds} set to 0 (not renormalised:
 *       sampling normalises).</li>
 * </ol>
 *
 * @param penaltyCounts F32 {@code [rows, vocab]}, or null when no row penalises
 * @param topK I32; {@code topPFirst}, {@code topPMinKeep}, {@code maskStopIds} I32
 * @param stopIds I32 token ids masked for rows with {@code maskStopIds}; may be null
 */
public record SamplingBatch(int rows, Tensor temperature, Tensor topK, Tensor topP, Tensor minP,
                            Tensor repetitionPenalty, Tensor penaltyCounts, Tensor topPFirst, Tensor topPMinKeep,
                            Tensor maskStopIds, Tensor stopIds, boolean applyFilters) {}
