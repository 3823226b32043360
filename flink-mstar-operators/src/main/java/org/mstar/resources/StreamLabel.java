package org.mstar.resources;

/** One (request, label) stream, used to name sink rows and retention targets. */
public record StreamLabel(String requestId, String label) {}
