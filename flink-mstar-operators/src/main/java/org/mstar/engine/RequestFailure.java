package org.mstar.engine;

/**
 * A request the engine gave up on, with an HTTP-style code: 400 for the client's mistake (the request
 * can never be served as sent, e.g. a prompt longer than the model's context), 500 for the model's
 * or engine's fault. The engine goes on serving every other request.
 */
public record RequestFailure(String requestId, int code, String message) {}
