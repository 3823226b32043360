package org.mstar.jobs;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Properties;

/**
 * What a state directory's checkpoints were taken with. A run resumes them only when everything here matches:
 * another model would continue requests with other weights, other topics or transactional ids would read
 * offsets and commit transactions that belong to something else, and another state format could not be read.
 *
 * @param stateFormat {@link #STATE_FORMAT} of the version that wrote the checkpoints
 * @param modelFingerprint {@code ModelFingerprint} of the engine factory and model folder
 * @param model the model folder as given (shown in messages; the fingerprint decides)
 */
record ServeManifest(String stateFormat, String modelFingerprint, String model, String requestsTopic,
                     String responsesTopic, String transactionalIdPrefix) {
    /**
     * Version of what serve keeps in checkpoints: operator uids, state types, the sink's transactional ids.
     * Raise it with any change a checkpoint of the previous version cannot be restored under, or that a previous
     * version would restore wrongly. 2: a live request's later tokens in chunks beside its mirror (version 1 would
     * resume from the mirror's tokens alone and generate the rest again) and the served ids.
     */
    static final String STATE_FORMAT = "2";

    ServeManifest {
        Objects.requireNonNull(stateFormat);
        Objects.requireNonNull(modelFingerprint);
        Objects.requireNonNull(model);
        Objects.requireNonNull(requestsTopic);
        Objects.requireNonNull(responsesTopic);
        Objects.requireNonNull(transactionalIdPrefix);
    }

    /**
     * What stops checkpoints taken under {@code this} from being resumed under {@code now}, one phrase each, such
     * as {@code another model (...)}; empty when they can be.
     */
    List<String> differencesFrom(ServeManifest now) {
        List<String> out = new ArrayList<>();
        if (!stateFormat.equals(now.stateFormat)) {
            out.add("another state format (" + stateFormat + "; this version of mstar serve reads and writes "
                    + now.stateFormat + ", so an older or newer mstar wrote them)");
        }
        if (!modelFingerprint.equals(now.modelFingerprint)) {
            out.add("another model (" + model + ", fingerprint " + modelFingerprint + "; now " + now.model
                    + ", fingerprint " + now.modelFingerprint + ")");
        }
        differs(out, "requests topic", requestsTopic, now.requestsTopic);
        differs(out, "responses topic", responsesTopic, now.responsesTopic);
        differs(out, "transactional-id prefix", transactionalIdPrefix, now.transactionalIdPrefix);
        return out;
    }

    private static void differs(List<String> out, String what, String then, String now) {
        if (!then.equals(now)) {
            out.add("another " + what + " ('" + then + "'; now '" + now + "')");
        }
    }

    Properties toProperties() {
        Properties p = new Properties();
        p.setProperty("state-format", stateFormat);
        p.setProperty("model-fingerprint", modelFingerprint);
        p.setProperty("model", model);
        p.setProperty("requests-topic", requestsTopic);
        p.setProperty("responses-topic", responsesTopic);
        p.setProperty("transactional-id-prefix", transactionalIdPrefix);
        return p;
    }

    /** Missing keys read as empty, so they show up as differences rather than failing. */
    static ServeManifest fromProperties(Properties p) {
        return new ServeManifest(p.getProperty("state-format", ""), p.getProperty("model-fingerprint", ""),
                p.getProperty("model", ""), p.getProperty("requests-topic", ""),
                p.getProperty("responses-topic", ""), p.getProperty("transactional-id-prefix", ""));
    }
}
