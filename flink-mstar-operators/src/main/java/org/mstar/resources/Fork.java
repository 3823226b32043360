package org.mstar.resources;

/** A full-page copy of stream {@code from} into stream {@code to} of the same request. */
public record Fork(String from, String to) {}
