package org.mstar.engine;

/**
 * One request's part of a step: feed tokens {@code [start, start + span)} of its sequence; when the
 * chunk reaches the sequence end the row {@code samples} the next token.
 */
record BatchRow(LiveRequest request, int start, int span, boolean samples) {}
