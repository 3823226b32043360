package org.mstar.engine;

/**
 * One generated token of one request: its 0-based {@code index} in the request's output, the text it
 * adds (incremental detokenisation; may be empty while a multi-byte character is incomplete), and the
 * finish reason when it is the request's last token (null otherwise).
 */
public record TokenOutput(String requestId, int index, int tokenId, String textDelta, FinishReason finish) {}
